/** The links at the top of every documentation page (the guide, the forms, the API reference). */
export const TOP_NAV =
  '<nav class="top"><a href="/documentation">Operator guide</a><a href="/reference">API reference</a><a href="/openapi.yaml">openapi.yaml</a></nav>';
