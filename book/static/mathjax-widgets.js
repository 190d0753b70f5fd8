// ipywidgets typesets its labels through MathJax 2's `MathJax.Hub.Queue`; the course's pages load MathJax 3,
// so they give it a stand-in. Loaded after the page's MathJax configuration and before MathJax itself.
window.MathJax = Object.assign(window.MathJax || {}, {
  Hub: {Queue: function () {}},
  startup: {
    ready: function () {
      MathJax.startup.defaultReady();
      MathJax.Hub = {Queue: function () { MathJax.typesetPromise(); }};
    },
  },
});
