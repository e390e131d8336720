"""The page at ``GET /``: paste a text, see its entities drawn and its record, and on request each
sentence's word-pair grid.

The drawing and the grids are made on the server by the project's own renderers
(``visualize``: discontinuous entities joined by a dashed line, nested ones stacked), which
escape every text they draw; everything else the page shows (the record's table, the
pipeline's name and labels, errors) is set as text (``textContent``), never as markup. The page
is static: no template values, nothing from a request is written into it.
"""

PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>spacy-w2ner</title>
<style>
  body { font-family: -apple-system, BlinkMacSystemFont, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2rem auto;
         max-width: 72rem; padding: 0 1rem; color: #222; }
  h1 { font-size: 1.4rem; margin-bottom: 0.2rem; }
  #about { color: #555; font-size: 0.9rem; margin-bottom: 1rem; }
  textarea { width: 100%; min-height: 7rem; font-size: 1rem; padding: 0.5rem; box-sizing: border-box; }
  .controls { display: flex; gap: 1.2rem; align-items: center; flex-wrap: wrap; margin: 0.6rem 0 1.2rem 0; }
  button { font-size: 1rem; padding: 0.4rem 1.2rem; cursor: pointer; }
  #error { color: #b00020; white-space: pre-wrap; }
  table { border-collapse: collapse; margin-top: 1rem; font-size: 0.9rem; }
  th, td { border: 1px solid #ccc; padding: 0.25rem 0.5rem; text-align: left; vertical-align: top; }
  th { background: #f3f3f3; }
  #drawing { margin-top: 0.5rem; }
</style>
</head>
<body>
<h1>spacy-w2ner</h1>
<div id="about">Flat, nested and discontinuous entities. <span id="pipeline"></span></div>
<label for="text">Text</label>
<textarea id="text" placeholder="After two weeks on Lipitor I had severe pain in the knees and ankles ."></textarea>
<div class="controls">
  <button id="submit" type="button">Find entities</button>
  <label><input id="grid" type="checkbox"> word-pair grid of each sentence</label>
  <label>threshold <input id="threshold" type="number" min="0" max="1" step="0.05" style="width: 5rem"></label>
  <label>API key <input id="token" type="password" autocomplete="off" style="width: 10rem"></label>
</div>
<div id="error" role="alert"></div>
<div id="drawing"></div>
<table id="records" hidden>
  <thead><tr><th>#</th><th>label</th><th>text</th><th>fragments (characters)</th><th>tokens</th><th>score</th>
  <th>discontinuous</th></tr></thead>
  <tbody></tbody>
</table>
<div id="grids"></div>
<script>
"use strict";
const $ = (id) => document.getElementById(id);

function headers() {
  const result = {"Content-Type": "application/json"};
  if ($("token").value) { result["Authorization"] = "Bearer " + $("token").value; }
  return result;
}

function cell(row, value) {
  const td = document.createElement("td");
  td.textContent = value;  // text, never markup
  row.appendChild(td);
}

function showRecord(record) {
  const body = $("records").querySelector("tbody");
  body.replaceChildren();
  record.entities.forEach((entity, k) => {
    const row = document.createElement("tr");
    cell(row, String(k + 1));
    cell(row, entity.label);
    cell(row, entity.text);
    cell(row, entity.fragments.map((f) => "[" + f[0] + ", " + f[1] + ")").join(" + "));
    cell(row, entity.tokens.join(" "));
    cell(row, entity.score === null ? "" : entity.score.toFixed(3));
    cell(row, entity.discontinuous ? "yes" : "");
    body.appendChild(row);
  });
  $("records").hidden = record.entities.length === 0;
}

async function submit() {
  $("error").textContent = "";
  $("submit").disabled = true;
  try {
    const threshold = $("threshold").value === "" ? null : Number($("threshold").value);
    const response = await fetch("render", {method: "POST", headers: headers(),
      body: JSON.stringify({text: $("text").value, grid: $("grid").checked, threshold: threshold})});
    const answer = await response.json();
    if (!response.ok) { throw new Error(answer.error || response.statusText); }
    $("drawing").innerHTML = answer.html;    // drawn and escaped by the server's renderer
    $("grids").innerHTML = answer.grids.join("");
    showRecord(answer.record);
    if (answer.record.entities.length === 0) { $("error").textContent = "No entity found."; }
  } catch (error) {
    $("error").textContent = String(error.message || error);
  } finally {
    $("submit").disabled = false;
  }
}

async function describe() {
  try {
    const response = await fetch("metadata", {headers: headers()});
    if (!response.ok) { return; }
    const meta = await response.json();
    $("pipeline").textContent = "Pipeline " + meta.pipeline.name + " " + meta.pipeline.version +
      "; labels: " + meta.labels.join(", ") + ".";
    $("threshold").min = meta.threshold.min;
  } catch (error) { /* the page still works */ }
}

$("submit").addEventListener("click", submit);
$("text").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) { submit(); }
});
describe();
</script>
</body>
</html>
"""
