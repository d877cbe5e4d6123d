// Dark/light theme: the choice is kept in localStorage and applied as data-theme on <html>;
// chart colours are read back from the CSS variables so SVG charts follow the theme.
import { createContext, useCallback, useContext, useEffect, useState, type ReactNode } from "react";

export type ThemeName = "dark" | "light";

export interface Palette {
  text: string;
  muted: string;
  grid: string;
  panel: string;
  danger: string;
  series: string[];
}

const VARS = ["--s1", "--s2", "--s3", "--s4", "--s5", "--s6"];

function readPalette(): Palette {
  const cs = getComputedStyle(document.documentElement);
  const v = (n: string) => cs.getPropertyValue(n).trim() || "#888";
  return {
    text: v("--text"),
    muted: v("--muted"),
    grid: v("--grid"),
    panel: v("--panel"),
    danger: v("--danger"),
    series: VARS.map(v),
  };
}

function initialTheme(): ThemeName {
  const saved = document.documentElement.dataset.theme;
  if (saved === "dark" || saved === "light") return saved;
  return window.matchMedia?.("(prefers-color-scheme: light)").matches ? "light" : "dark";
}

interface ThemeCtx {
  theme: ThemeName;
  palette: Palette;
  toggle: () => void;
}

const Ctx = createContext<ThemeCtx | null>(null);

export function ThemeProvider({ children }: { children: ReactNode }) {
  const [theme, setTheme] = useState<ThemeName>(initialTheme);
  const [palette, setPalette] = useState<Palette>(readPalette);
  useEffect(() => {
    document.documentElement.dataset.theme = theme;
    try {
      localStorage.setItem("sw_theme", theme);
    } catch {
      // storage may be disabled; the theme still applies for this visit
    }
    setPalette(readPalette());
  }, [theme]);
  const toggle = useCallback(() => setTheme((t) => (t === "dark" ? "light" : "dark")), []);
  return <Ctx.Provider value={{ theme, palette, toggle }}>{children}</Ctx.Provider>;
}

export function useTheme(): ThemeCtx {
  const c = useContext(Ctx);
  if (!c) throw new Error("useTheme outside ThemeProvider");
  return c;
}
