// Starts Swagger UI on /openapi.yaml. A file rather than an inline script, so the page's CSP can
// forbid inline scripts; every option that would reach another host is off.
window.addEventListener('DOMContentLoaded', function () {
  window.ui = SwaggerUIBundle({
    url: '/openapi.yaml',
    dom_id: '#swagger-ui',
    deepLinking: true,
    // The default would load a validity badge from a public validator.
    validatorUrl: null,
    docExpansion: 'list',
    filter: true,
    displayOperationId: true,
    displayRequestDuration: true,
    defaultModelsExpandDepth: 0,
    defaultModelExpandDepth: 3,
    defaultModelRendering: 'model',
    showExtensions: false,
    showCommonExtensions: true,
    tryItOutEnabled: false,
    persistAuthorization: false,
    presets: [SwaggerUIBundle.presets.apis],
    layout: 'BaseLayout',
  });
});
