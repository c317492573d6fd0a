package hub

import (
	"embed"
	"io/fs"
	"net/http"
)

// ui holds the operator page: static files that read the operator API
// with the token the user signs in with. They carry no data, so they are
// served without authentication.
//
//go:embed ui/index.html ui/app.js ui/style.css
var ui embed.FS

// uiHeaders are set on every file of the page: no inline script or style,
// no framing, requests only to this origin, no referrer.
var uiHeaders = map[string]string{
	"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; " +
		"base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
	"X-Content-Type-Options": "nosniff",
	"X-Frame-Options":        "DENY",
	"Referrer-Policy":        "no-referrer",
	"Cache-Control":          "no-cache",
}

func (h *Hub) uiRoutes(mux *http.ServeMux) {
	sub, err := fs.Sub(ui, "ui")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.StripPrefix("/ui/", http.FileServerFS(sub))
	mux.HandleFunc("GET /ui/", func(w http.ResponseWriter, r *http.Request) {
		for k, v := range uiHeaders {
			w.Header().Set(k, v)
		}
		files.ServeHTTP(w, r)
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ui/", http.StatusFound)
	})
}
