//! The browser client (filled by the browser-client work).
