// vacate report: drilling into a directory of the treemap, and a panel for the tile clicked.
// Everything shown is in the HTML already; this only moves tiles and copies text
// (textContent, never HTML).
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("data").textContent);
  var panel = document.getElementById("panel");
  function box(t) {
    return ["left", "top", "width", "height"].map(function (k) {
      return parseFloat(t.dataset["o" + k] || (t.dataset["o" + k] = t.style[k]));
    });
  }
  function under(t, root, byIndex) {
    for (var p = t; p; p = byIndex[p.dataset.p]) { if (p === root) { return true; } }
    return false;
  }
  function zoom(map, root) {
    var tiles = map.querySelectorAll(".t"), byIndex = {};
    tiles.forEach(function (t) { byIndex[t.dataset.i] = t; });
    var r = root ? box(root) : [0, 0, 100, 100];
    tiles.forEach(function (t) {
      var b = box(t), show = !root || under(t, root, byIndex);
      t.style.display = show ? "" : "none";
      if (!show) { return; }
      t.style.left = (b[0] - r[0]) * 100 / r[2] + "%";
      t.style.top = (b[1] - r[1]) * 100 / r[3] + "%";
      t.style.width = b[2] * 100 / r[2] + "%";
      t.style.height = b[3] * 100 / r[3] + "%";
    });
    var up = map.querySelector(".up");
    up.hidden = !root;
    up.onclick = function () { zoom(map, root ? byIndex[root.dataset.p] : null); };
  }
  function show(t) {
    var lines = [t.title];
    (data.users[t.dataset.top] || []).forEach(function (u) {
      lines.push(u.name + ": " + u.evidence.join(", "));
    });
    panel.textContent = lines.join("\n");
    panel.hidden = false;
  }
  document.querySelectorAll(".map").forEach(function (map) {
    map.addEventListener("click", function (e) {
      var t = e.target.closest(".t");
      if (!t) { return; }
      show(t);
      if (t.classList.contains("nest")) { zoom(map, t); }
    });
  });
})();
