document.querySelectorAll("button[data-copy]").forEach(function (button) {
  var source = document.getElementById(button.getAttribute("data-copy"));
  if (!source) return;
  button.hidden = false;
  button.addEventListener("click", function () {
    var text = source.textContent;
    function done() {
      button.textContent = "Copied";
      setTimeout(function () { button.textContent = "Copy"; }, 1500);
    }
    function fallback() {
      var range = document.createRange();
      range.selectNodeContents(source);
      var selection = window.getSelection();
      selection.removeAllRanges();
      selection.addRange(range);
      if (document.execCommand("copy")) done();
    }
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, fallback);
    } else {
      fallback();
    }
  });
});
