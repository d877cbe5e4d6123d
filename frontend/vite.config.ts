import { defineConfig } from "vitest/config";
import react from "@vitejs/plugin-react";

// The API serves dist/ at "/", so asset URLs are absolute from the root.
export default defineConfig({
  plugins: [react()],
  base: "/",
  build: {
    outDir: "dist",
    emptyOutDir: true,
    chunkSizeWarningLimit: 600,
    rollupOptions: {
      output: {
        manualChunks(id: string) {
          // React alone in the first chunk; Recharts and its state libraries load with the first chart.
          if (/node_modules\/(react|react-dom|scheduler)\//.test(id)) return "react";
          return undefined;
        },
      },
    },
  },
  server: {
    proxy: { "/api": process.env.STORMWATCH_API ?? "http://127.0.0.1:8000" },
  },
  test: {
    include: ["src/**/*.test.{ts,tsx}"],
    environment: "node",
    // A file's first test also pays for loading jsdom and the modules: seconds on a loaded host.
    testTimeout: 30_000,
  },
});
