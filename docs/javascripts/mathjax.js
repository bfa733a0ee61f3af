// MathJax 3 configuration, read by assets/mathjax/tex-svg.js (loaded after this file, from
// the site itself: docs/hooks.py copies it from the django-static-mathjax package).
// Typesets only pymdownx.arithmatex's output on the workflow pages (\( \) and \[ \]) and
// the markdown cells of the tutorials ($...$ and $$...$$, as Jupyter shows them).
window.MathJax = {
  tex: {
    inlineMath: [["\\(", "\\)"], ["$", "$"]],
    displayMath: [["\\[", "\\]"], ["$$", "$$"]],
    processEscapes: true,
    processEnvironments: true,
  },
  options: {
    ignoreHtmlClass: ".*|",
    processHtmlClass: "arithmatex|jp-MarkdownOutput",
  },
};
