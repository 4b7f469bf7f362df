/* The query editor: keyword chips, predicates picked from the stream's schema with typed values, a live preview.

   The form's own fields stay what the server validates (the keywords as words separated by spaces, each
   predicate's relation, attribute, op and a JSON value); this script only fills them from friendlier
   controls and asks /queries/preview/ for the server's opinion as the query changes. */
(function () {
  "use strict";

  const config = JSON.parse(document.getElementById("editor-config").textContent);
  const form = document.getElementById("query-form");
  const streamSelect = form.elements.stream;
  const rows = document.getElementById("predicate-rows");
  const template = document.getElementById("predicate-template");
  const totalForms = form.elements["predicates-TOTAL_FORMS"];
  const preview = document.getElementById("query-preview");

  function element(tag, attrs, text) {
    const node = document.createElement(tag);
    Object.entries(attrs || {}).forEach(([name, value]) => node.setAttribute(name, value));
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function schema() {
    return config.streams[streamSelect.value] || { relations: [] };
  }

  /* ------------------------------------------------------------------ keyword chips */

  function keywordChips() {
    const field = form.elements.keywords;
    const box = element("div", { class: "chip-box", id: "keyword-chips" });
    const entry = element("input", { type: "text", class: "chip-entry", id: "keyword-entry", autocomplete: "off",
                                     spellcheck: "false", "aria-label": "add a keyword",
                                     placeholder: "type a keyword, then Enter or space" });
    field.hidden = true;
    field.after(box);
    const words = () => field.value.split(/\s+/).filter(Boolean);

    function render() {
      box.querySelectorAll(".chip").forEach((chip) => chip.remove());
      words().forEach((word, i) => {
        const chip = element("span", { class: "chip", "data-keyword": word }, word);
        const remove = element("button", { type: "button", title: `remove ${word}`, "aria-label": `remove ${word}` }, "×");
        remove.addEventListener("click", () => {
          const kept = words();
          kept.splice(i, 1);
          field.value = kept.join(" ");
          render();
          changed();
        });
        chip.append(remove);
        box.insertBefore(chip, entry);
      });
    }

    function add() {
      const typed = entry.value.trim().toLowerCase();
      entry.value = "";
      if (!typed) return;
      const all = words();
      typed.split(/[\s,]+/).filter(Boolean).forEach((word) => { if (!all.includes(word)) all.push(word); });
      field.value = all.join(" ");
      render();
      changed();
    }

    entry.addEventListener("keydown", (event) => {
      if (event.key === "Enter" || event.key === " " || event.key === ",") {
        event.preventDefault();
        add();
      } else if (event.key === "Backspace" && !entry.value && words().length) {
        field.value = words().slice(0, -1).join(" ");
        render();
        changed();
      }
    });
    entry.addEventListener("blur", add);
    box.addEventListener("click", (event) => { if (event.target === box) entry.focus(); });
    box.append(entry);
    render();
  }

  /* ------------------------------------------------------------------ predicates */

  function options(select, values, selected) {
    select.replaceChildren(...values.map((value) => {
      const option = element("option", { value }, value);
      option.selected = value === selected;
      return option;
    }));
    if (!values.includes(selected) && values.length) select.value = values[0];
  }

  function asSelect(input, cls) {
    const select = element("select", { name: input.name, id: input.id, class: cls });
    select.dataset.initial = input.value;
    input.replaceWith(select);
    return select;
  }

  function typedValue(type, raw) {
    if (raw === "") return null;
    if (type === "int") return Number.isInteger(Number(raw)) ? Number(raw) : raw;
    if (type === "float") return Number.isFinite(Number(raw)) ? Number(raw) : raw;
    if (type === "bool") return raw === "true";
    return raw;
  }

  function valueInput(type, value) {
    let input;
    if (type === "bool") {
      input = element("select", { class: "typed" });
      options(input, ["true", "false"], value === false ? "false" : "true");
    } else if (type === "int" || type === "float") {
      input = element("input", { type: "number", class: "typed", step: type === "int" ? "1" : "any" });
      if (value !== null && value !== undefined) input.value = value;
    } else if (type === "timestamp") {
      input = element("input", { type: "datetime-local", class: "typed", step: "1", title: "UTC" });
      if (typeof value === "string") input.value = value.replace(/Z$/, "").slice(0, 19);
      else if (typeof value === "number") input.value = new Date(value * 1000).toISOString().slice(0, 19);
    } else {
      input = element("input", { type: "text", class: "typed" });
      if (value !== null && value !== undefined) input.value = value;
    }
    input.setAttribute("aria-label", "value");
    return input;
  }

  function predicateRow(row) {
    const [relation, attribute, op] = ["relation", "attribute", "op"].map(
      (name) => row.querySelector(`[name$="-${name}"]`));
    const hidden = row.querySelector('[name$="-value"]');
    const remove = row.querySelector('[name$="-DELETE"]');
    const relationSelect = asSelect(relation, "relation");
    const attributeSelect = asSelect(attribute, "attribute");
    const cell = row.querySelector(".value-cell");
    hidden.hidden = true;
    let initial = null;
    try { initial = hidden.value ? JSON.parse(hidden.value) : null; } catch (error) { initial = hidden.value; }

    remove.hidden = true;
    const removeButton = element("button", { type: "button", class: "button", title: "remove this predicate" }, "Remove");
    removeButton.addEventListener("click", () => {
      remove.checked = true;
      row.hidden = true;
      const errors = row.nextElementSibling;
      if (errors && errors.classList.contains("predicate-errors")) errors.hidden = true;
      emptyNote();
      changed();
    });
    remove.closest("td").append(removeButton);

    function typeOf() {
      const rel = schema().relations.find((r) => r.name === relationSelect.value);
      return rel ? rel.attributes[attributeSelect.value] : "text";
    }

    function writeValue() {
      const type = typeOf();
      const inputs = [...cell.querySelectorAll(".typed")];
      const values = inputs.map((input) => typedValue(type, input.value));
      if (op.value === "between") hidden.value = values.some((v) => v === null) ? "" : JSON.stringify(values);
      else hidden.value = values[0] === null ? "" : JSON.stringify(values[0]);
    }

    function drawValue(value) {
      cell.querySelectorAll(".typed, .and").forEach((node) => node.remove());
      const type = typeOf();
      if (op.value === "between") {
        const [low, high] = Array.isArray(value) ? value : [null, null];
        cell.append(valueInput(type, low), element("span", { class: "and" }, "and"), valueInput(type, high));
      } else {
        cell.append(valueInput(type, Array.isArray(value) ? null : value));
      }
      cell.querySelectorAll(".typed").forEach((input) => {
        input.addEventListener("input", () => { writeValue(); changed(); });
        input.addEventListener("change", () => { writeValue(); changed(); });
      });
      writeValue();
    }

    function drawOps() {
      const allowed = config.type_ops[typeOf()] || config.ops;
      options(op, allowed, op.value);
    }

    function drawAttributes(selected) {
      const rel = schema().relations.find((r) => r.name === relationSelect.value);
      options(attributeSelect, rel ? Object.keys(rel.attributes) : [], selected);
    }

    function drawRelations(selected) {
      options(relationSelect, schema().relations.map((r) => r.name), selected);
    }

    drawRelations(relationSelect.dataset.initial);
    drawAttributes(attributeSelect.dataset.initial);
    drawOps();
    drawValue(initial);
    relationSelect.addEventListener("change", () => { drawAttributes(""); drawOps(); drawValue(null); changed(); });
    attributeSelect.addEventListener("change", () => { drawOps(); drawValue(null); changed(); });
    op.addEventListener("change", () => { drawValue(null); changed(); });
    row.redraw = () => { drawRelations(""); drawAttributes(""); drawOps(); drawValue(null); };
  }

  function emptyNote() {
    const visible = [...rows.querySelectorAll(".predicate-row")].some((row) => !row.hidden);
    document.getElementById("predicate-empty").hidden = visible;
  }

  function addPredicate() {
    const index = String(Number(totalForms.value));
    const row = template.content.firstElementChild.cloneNode(true);
    row.querySelectorAll("[name], [id], [for]").forEach((node) => ["name", "id", "for"].forEach((attr) => {
      if (node.hasAttribute(attr)) node.setAttribute(attr, node.getAttribute(attr).replace(/__prefix__/g, index));
    }));
    rows.append(row);
    totalForms.value = String(Number(index) + 1);
    predicateRow(row);
    emptyNote();
    row.querySelector("select.relation").focus();
    changed();
  }

  /* ------------------------------------------------------------------ preview */

  let timer = null;
  let asked = 0;

  async function refresh() {
    const mine = ++asked;
    const data = new FormData(form);
    data.set("query", config.query === null ? "" : String(config.query));
    try {
      const response = await fetch(config.preview, { method: "POST", body: data, credentials: "same-origin",
                                                     headers: { Accept: "text/html" } });
      if (mine !== asked) return; // a newer question is on its way
      const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
      preview.replaceChildren(...fresh.body.childNodes);
      preview.dataset.state = response.ok ? "fresh" : "failed";
    } catch (error) {
      preview.dataset.state = "failed";
    }
  }

  function changed() {
    preview.dataset.state = "pending";
    window.clearTimeout(timer);
    timer = window.setTimeout(refresh, 350);
  }

  keywordChips();
  rows.querySelectorAll(".predicate-row").forEach(predicateRow);
  document.getElementById("add-predicate").addEventListener("click", addPredicate);
  streamSelect.addEventListener("change", () => {
    rows.querySelectorAll(".predicate-row").forEach((row) => row.redraw && row.redraw());
  });
  form.addEventListener("input", changed);
  form.addEventListener("change", changed);
  refresh();
})();
