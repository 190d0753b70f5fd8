// The course's MathJax 3 start-up, for the book and the decks. Loaded after the page's MathJax configuration
// and before MathJax itself.
//
// 1. ipywidgets typesets its labels through MathJax 2's `MathJax.Hub.Queue`: the pages get a stand-in.
// 2. MathJax 3 does not break long display equations into lines, so one wider than its column is scaled
//    down to fit (no further than MIN_SCALE; beyond that, course.css lets it scroll inside its column).
//    Decks call `fitDisplayMath(slide)` when a slide is shown: a hidden slide has no width to fit.
(function () {
  var MIN_SCALE = 0.6;

  function fitDisplayMath(root) {
    var boxes = (root || document).querySelectorAll('mjx-container[display="true"]');
    boxes.forEach(function (box) {
      var math = box.firstElementChild;
      if (!math) return;
      math.style.fontSize = "";
      var room = box.clientWidth, need = math.offsetWidth;
      if (room === 0 || need <= room) return;
      math.style.fontSize = (100 * Math.max(MIN_SCALE, Math.floor((1000 * room) / need) / 1000)) + "%";
    });
  }

  window.fitDisplayMath = fitDisplayMath;
  window.addEventListener("resize", function () { fitDisplayMath(); });
  window.MathJax = Object.assign(window.MathJax || {}, {
    Hub: {Queue: function () {}},
    startup: {
      ready: function () {
        MathJax.startup.defaultReady();
        MathJax.startup.promise.then(function () { fitDisplayMath(); });
        MathJax.Hub = {Queue: function () { MathJax.typesetPromise().then(function () { fitDisplayMath(); }); }};
      },
    },
  });
})();
