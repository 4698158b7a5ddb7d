// Starts Scalar's API reference on /openapi.yaml. A file rather than an inline script, so the page's
// CSP can forbid inline scripts. Everything that would reach another host is off: its fonts, its
// telemetry, its MCP and agent features, its developer toolbar; requests made from the page go to
// this service only (no proxy). Request samples are the document's own (x-codeSamples: curl and
// @ets/client), not generated clients for other languages.
//
// Loaded before the bundle: Zod, inside it, would probe whether it may compile validators with
// `Function('')`; this page's CSP refuses eval (the probe is caught, but the browser reports a CSP
// violation). `jitless` makes Zod validate without compiling, and without asking.
globalThis.__zod_globalConfig = Object.assign(globalThis.__zod_globalConfig || {}, { jitless: true });

window.addEventListener('DOMContentLoaded', function () {
  window.reference = Scalar.createApiReference('#reference', {
    url: '/openapi.yaml',
    withDefaultFonts: false,
    telemetry: false,
    showDeveloperTools: 'never',
    mcp: { disabled: true },
    agent: { disabled: true },
    hiddenClients: true,
    hideClientButton: true,
    persistAuth: false,
    documentDownloadType: 'direct',
    defaultOpenFirstTag: false,
    operationTitleSource: 'summary',
    showOperationId: false,
    hideDarkModeToggle: false,
  });
});
