// Applies the saved theme before first paint so there is no flash. A file of its own, not an
// inline script: the Content-Security-Policy allows scripts from this origin only.
try {
  var t = localStorage.getItem("sw_theme");
  if (t) document.documentElement.dataset.theme = t;
} catch (e) {}
