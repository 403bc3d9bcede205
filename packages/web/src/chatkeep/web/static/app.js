// chatkeep serve: progressive enhancement only; every page works without this file.
// No stored content ever goes through innerHTML: this script only toggles, focuses and opens.
"use strict";
(function () {
  const toggles = ["show-undone", "show-markers", "show-compacted"];
  for (const id of toggles) {
    const box = document.getElementById(id);
    if (!box) continue;
    const saved = window.localStorage.getItem("chatkeep." + id);
    if (saved !== null) box.checked = saved === "1";
    box.addEventListener("change", () => window.localStorage.setItem("chatkeep." + id, box.checked ? "1" : "0"));
  }
  const expand = document.getElementById("expand-all");
  if (expand) {
    expand.hidden = false;
    expand.addEventListener("click", () => {
      const tools = Array.from(document.querySelectorAll("details.tool"));
      const open = !tools.every((d) => d.open);
      tools.forEach((d) => { d.open = open; });
      expand.textContent = open ? "Collapse all tool calls" : "Expand all tool calls";
    });
  }
  // j / k: next / previous message; the browser scrolls it into view and focuses it.
  document.addEventListener("keydown", (event) => {
    if (event.altKey || event.ctrlKey || event.metaKey) return;
    const target = event.target;
    if (target instanceof HTMLInputElement || target instanceof HTMLTextAreaElement) return;
    if (event.key !== "j" && event.key !== "k") return;
    const items = Array.from(document.querySelectorAll("li.message")).filter((el) => el.offsetParent !== null);
    if (!items.length) return;
    const current = items.indexOf(document.activeElement);
    const next = event.key === "j" ? Math.min(current + 1, items.length - 1) : Math.max(current - 1, 0);
    items[next].focus();
    event.preventDefault();
  });
  // Opened at a position (a fork's link): focus that message.
  if (window.location.hash.startsWith("#p-")) {
    const el = document.getElementById(window.location.hash.slice(1));
    if (el) el.focus();
  }
})();
