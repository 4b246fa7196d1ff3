// The API's interactive docs (/docs): Swagger UI over this server's OpenAPI document, served
// from this origin (no CDN, no inline script: the page's Content-Security-Policy allows none).
window.addEventListener("DOMContentLoaded", () => {
  window.ui = SwaggerUIBundle({
    url: "/openapi.json",
    dom_id: "#swagger-ui",
    deepLinking: true,
    presets: [SwaggerUIBundle.presets.apis],
    layout: "BaseLayout",
  });
});
