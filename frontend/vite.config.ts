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
          if (id.includes("node_modules/recharts") || id.includes("node_modules/d3-") || id.includes("node_modules/victory-vendor")) return "charts";
          if (id.includes("node_modules/react") || id.includes("node_modules/scheduler")) return "react";
          return undefined;
        },
      },
    },
  },
  server: {
    proxy: { "/api": process.env.STORMWATCH_API ?? "http://127.0.0.1:8000" },
  },
  test: {
    include: ["src/**/*.test.ts"],
    environment: "node",
  },
});
