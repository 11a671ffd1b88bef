// Vite build of the console: `npx vite build --config web/vite.config.ts` (from the repository
// root) writes web/dist, which `gpuplane serve` serves at /console/ (built into the binary, or
// from --console-dir). One origin, no CDN, no inline script: the page's CSP forbids both.
import { defineConfig } from 'vite';

// This folder, wherever vite is started from.
const root = decodeURIComponent(new URL('.', import.meta.url).pathname);

export default defineConfig({
  root,
  base: '/console/',
  publicDir: false,
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    sourcemap: false,
    // One small script and one stylesheet; no inlined assets (the CSP allows data: images only).
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    reportCompressedSize: false,
  },
  server: {
    // `npx vite --config web/vite.config.ts` with a server on :8080 (GPUPLANE_PLAINTEXT=1 make run).
    proxy: { '/v1': 'http://127.0.0.1:8080' },
  },
});
