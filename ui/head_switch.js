// The head switch (ui/head_switch.py): draws any head of the layer it was given, from the codes it holds, at once,
// then reports the choice to Python ({head, seq, digest}: seq makes every choice a change, even back to a head
// reported before; digest names the layer it was chosen on). Token labels are drawn on a canvas or written as textContent: never parsed as HTML.
const MASKED = 65535;
const states = new WeakMap(); // per mounted element: what it shows and the layer it decoded

// A head's codes: zlib-deflated, high bytes then low bytes (viz/head_cells.py), inflated by the browser itself.
async function decode(bytes) {
  const inflated = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
  return fromPlanes(new Uint8Array(await new Response(inflated).arrayBuffer()));
}

function fromPlanes(planes) { // high bytes then low bytes, as uint16 codes
  const n = planes.length / 2;
  const codes = new Uint16Array(n);
  for (let i = 0; i < n; i++) codes[i] = (planes[i] << 8) | planes[n + i];
  return codes;
}

function rgb(hex) {
  return [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16));
}

function cellsOf(s, head) { // a promise of the head's codes, decoded once
  if (!s.decoded[head]) s.decoded[head] = decode(s.data.heads[head]).then((codes) => { s.ready[head] = codes; return codes; });
  return s.decoded[head];
}

function short(label) {
  return label.length > 14 ? label.slice(0, 13) + "…" : label;
}

function drawLabels(canvas, labels, cell, margin, across, dpr, colour) {
  const n = labels.length;
  const every = Math.max(1, Math.ceil(11 / cell));
  const length = n * cell;
  canvas.style.width = (across ? length : margin) + "px";
  canvas.style.height = (across ? margin : length) + "px";
  canvas.width = Math.round((across ? length : margin) * dpr);
  canvas.height = Math.round((across ? margin : length) * dpr);
  const g = canvas.getContext("2d");
  g.scale(dpr, dpr);
  g.fillStyle = colour;
  g.font = `${Math.min(12, Math.max(8, cell - 2))}px sans-serif`;
  g.textBaseline = "middle";
  for (let i = 0; i < n; i += every) {
    const centre = i * cell + cell / 2;
    g.save();
    if (across) {
      g.translate(centre, margin - 4);
      g.rotate(-Math.PI / 2);
      g.textAlign = "left";
      g.fillText(short(labels[i]), 0, 0);
    } else {
      g.textAlign = "right";
      g.fillText(short(labels[i]), margin - 4, centre);
    }
    g.restore();
  }
}

function drawCells(s, head) {
  const d = s.data;
  const rows = d.rows.length, cols = d.cols.length;
  const codes = s.ready[head];
  const top = d.tops[head], step = d.step;
  const image = new ImageData(cols, rows);
  const pixels = new Uint32Array(image.data.buffer); // RGBA bytes as one word, in the platform's byte order
  const levels = s.words.length - 1, scale = (step / top) * levels;
  for (let i = 0; i < rows * cols; i++) {
    const code = codes[i];
    pixels[i] = code === MASKED ? s.maskWord : s.words[Math.round(Math.min(levels, code * scale))];
  }
  s.source.width = cols;
  s.source.height = rows;
  s.source.getContext("2d").putImageData(image, 0, 0);
  const g = s.heat.getContext("2d");
  g.imageSmoothingEnabled = false;
  g.clearRect(0, 0, s.heat.width, s.heat.height);
  g.drawImage(s.source, 0, 0, s.heat.width, s.heat.height);
}

function layout(s) {
  const d = s.data;
  const rows = d.rows.length, cols = d.cols.length;
  const dpr = window.devicePixelRatio || 1;
  const room = Math.max(120, Math.min(720, (s.root.clientWidth || 720) - s.margin - 8));
  s.cell = Math.max(1, Math.floor(room / Math.max(rows, cols)));
  s.heat.style.width = cols * s.cell + "px";
  s.heat.style.height = rows * s.cell + "px";
  s.heat.width = Math.round(cols * s.cell * dpr);
  s.heat.height = Math.round(rows * s.cell * dpr);
  const colour = getComputedStyle(s.root).color || "#31333f";
  drawLabels(s.rowLabels, d.rows, s.cell, s.margin, false, dpr, colour);
  drawLabels(s.colLabels, d.cols, s.cell, s.margin, true, dpr, colour);
}

function show(s, head) {
  s.head = head;
  s.buttons.forEach((b, h) => {
    b.setAttribute("aria-checked", String(h === head));
    b.tabIndex = h === head ? 0 : -1;
  });
  const draw = () => { // the title names the head whose cells are drawn, never the one still being decoded
    if (s.head !== head) return;
    performance.mark("head-switch:decoded");
    if (s.images) s.images.forEach((img, h) => { img.hidden = h !== head; });
    else drawCells(s, head);
    s.title.textContent = `Layer ${s.data.layer}, head ${head}`;
    const [rows, cols] = s.data.axes || ["queries", "keys"];
    s.heat.setAttribute("aria-label", `Attention weights of layer ${s.data.layer}, head ${head}: rows ${rows}, columns ${cols}`);
    s.heat.dataset.head = String(head);
    s.heat.dataset.n = String(s.images ? s.data.n : s.data.rows.length);
    performance.mark("head-switch:drawn"); // for the bench (bench/head_switch.py): when the new data is on the canvas
  };
  if (s.images && !s.data.heads[head]) { // not pooled yet: say so (the server sends it once it is)
    s.images.forEach((img) => { img.hidden = true; });
    s.title.textContent = `Layer ${s.data.layer}, head ${head}: being computed…`;
    s.heat.dataset.head = "";
  } else if (!s.images && !s.data.heads[head]) { // another layer's first message had the shown head alone: this one
    // is drawn when the rest of the layer arrives (a moment later)
    s.heat.getContext("2d").clearRect(0, 0, s.heat.width, s.heat.height);
    s.title.textContent = `Layer ${s.data.layer}, head ${head}: loading…`;
    s.heat.dataset.head = "";
  } else if (s.images) {
    const img = s.images[head];
    if (img.complete) draw();
    else img.decode().then(draw, draw);
  } else if (s.ready[head]) draw();
  else cellsOf(s, head).then(draw);
}

function choose(s, head) {
  if (head === s.head) return;
  show(s, head);
  s.seq = Date.now() * 1000 + ((s.seq || 0) % 1000) + 1;
  s.setStateValue("head", { head, seq: s.seq, digest: s.digest }); // the layer it was chosen on
}

function hoverImage(s, event) {
  const d = s.data;
  const box = s.heat.getBoundingClientRect();
  const col = Math.floor(((event.clientX - box.left) / box.width) * d.pixels);
  const row = Math.floor(((event.clientY - box.top) / box.height) * d.pixels);
  if (row < 0 || col < 0 || row >= d.pixels || col >= d.pixels) {
    s.tip.hidden = true;
    return;
  }
  const span = (starts, i) => { const last = (i + 1 < starts.length ? starts[i + 1] : d.n) - 1;
    return starts[i] === last ? `${last}` : `${starts[i]}–${last}`; };
  s.tip.textContent = `queries ${span(d.rowStarts, row)} → keys ${span(d.colStarts, col)} (one pixel: the ${d.how} of their weights)`;
  s.tip.style.left = event.clientX - box.left + 12 + "px";
  s.tip.style.top = event.clientY - box.top + 12 + "px";
  s.tip.hidden = false;
}

function hover(s, event) {
  if (s.images) { hoverImage(s, event); return; }
  const box = s.heat.getBoundingClientRect();
  const col = Math.floor((event.clientX - box.left) / s.cell);
  const row = Math.floor((event.clientY - box.top) / s.cell);
  const d = s.data;
  if (row < 0 || col < 0 || row >= d.rows.length || col >= d.cols.length) {
    s.tip.hidden = true;
    return;
  }
  const shown = s.ready[Number(s.heat.dataset.head)];
  if (!shown) return;
  const code = shown[row * d.cols.length + col];
  const weight = code === MASKED ? "masked" : (d.step === 1e-4 ? code / 10000 : code * d.step).toFixed(4);
  s.tip.textContent = `query ${d.rows[row]} (${row}) → key ${d.cols[col]} (${col}): ${weight}`;
  s.tip.style.left = event.clientX - box.left + s.margin + 12 + "px";
  s.tip.style.top = event.clientY - box.top + s.margin + 12 + "px";
  s.tip.hidden = false;
}

function build(parentElement, data) {
  const root = parentElement.querySelector(".head-switch");
  root.replaceChildren();
  const s = { data, root, decoded: {}, ready: {}, head: null, margin: 96 };
  if (data.kind === "cells" && Number.isInteger(data.raw)) { // the head to show came inflated: drawn at once, before
    // any other message (the Plotly figure's) takes the main thread
    s.ready[data.raw] = fromPlanes(data.heads[data.raw]);
    s.decoded[data.raw] = Promise.resolve(s.ready[data.raw]);
  }
  if (data.kind === "cells") {
    const word = (hex) => new Uint32Array(new Uint8ClampedArray([...rgb(hex), 255]).buffer)[0];
    s.words = Uint32Array.from(data.palette, word);
    s.maskWord = word(data.mask);
  }
  const group = document.createElement("div");
  group.className = "heads";
  group.setAttribute("role", "radiogroup");
  group.setAttribute("aria-label", "Head");
  s.buttons = data.heads.map((_, h) => {
    const b = document.createElement("button");
    b.type = "button";
    b.setAttribute("role", "radio");
    b.textContent = `Head ${h}`;
    b.addEventListener("click", () => choose(s, h));
    group.appendChild(b);
    return b;
  });
  group.addEventListener("keydown", (event) => {
    const last = s.buttons.length - 1;
    const next = { ArrowRight: s.head + 1, ArrowDown: s.head + 1, ArrowLeft: s.head - 1, ArrowUp: s.head - 1,
                   Home: 0, End: last }[event.key];
    if (next === undefined) return;
    event.preventDefault();
    const head = Math.max(0, Math.min(last, next));
    choose(s, head);
    s.buttons[head].focus();
  });
  s.title = document.createElement("p");
  s.title.className = "title";
  if (data.kind === "image") return buildImages(parentElement, s, group);
  const grid = document.createElement("div");
  grid.className = "grid";
  s.rowLabels = document.createElement("canvas");
  s.colLabels = document.createElement("canvas");
  s.heat = document.createElement("canvas");
  s.heat.setAttribute("role", "img");
  s.rowLabels.setAttribute("aria-hidden", "true");
  s.colLabels.setAttribute("aria-hidden", "true");
  s.source = document.createElement("canvas");
  const corner = document.createElement("div");
  s.tip = document.createElement("div");
  s.tip.className = "tip";
  s.tip.hidden = true;
  s.tip.setAttribute("role", "status");
  grid.append(corner, s.colLabels, s.rowLabels, s.heat, s.tip);
  grid.style.gridTemplateColumns = `${s.margin}px auto`;
  s.heat.addEventListener("mousemove", (event) => hover(s, event));
  s.heat.addEventListener("mouseleave", () => { s.tip.hidden = true; });
  s.axes = document.createElement("p"); // what the rows and columns are (the Plotly figure's axis titles)
  s.axes.className = "axes";
  if (data.axes) s.axes.textContent = `Rows: ${data.axes[0]}. Columns: ${data.axes[1]}.`;
  root.append(group, s.title, s.axes, grid);
  layout(s);
  held(s);
  s.parentElement = parentElement;
  setTimeout(() => decodeAhead(s, 0), 50);
  return s;
}

function decodeAhead(s, h) { // decode the other heads ahead, one per idle moment, so a click only draws
  const heads = s.data.heads;
  while (h < heads.length && !heads[h]) h++; // not arrived yet: decoded once the rest of the layer arrives
  if (h >= heads.length || states.get(s.parentElement) !== s) return;
  cellsOf(s, h).then(() => setTimeout(() => decodeAhead(s, h + 1), 0));
}

function held(s) { // how many of the layer's heads the browser holds (for tests)
  s.heat.dataset.held = String(s.data.heads.filter(Boolean).length);
}

// The rest of a layer whose first message held the shown head alone: the other heads in place, a head chosen
// meanwhile drawn, the buttons and focus kept.
function fill(s, data) {
  data.heads.forEach((head, h) => {
    if (!head || s.data.heads[h]) return;
    s.data.heads[h] = head;
    if (h === data.raw) { s.ready[h] = fromPlanes(head); s.decoded[h] = Promise.resolve(s.ready[h]); }
  });
  s.data.partial = false;
  held(s);
  if (s.head !== null && s.heat.dataset.head !== String(s.head)) show(s, s.head);
  setTimeout(() => decodeAhead(s, 0), 0);
}

function buildImages(parentElement, s, group) {
  const d = s.data;
  s.heat = document.createElement("div"); // the pooled heads, one image pixel per device pixel (never resampled)
  s.heat.className = "pooled";
  s.heat.setAttribute("role", "img");
  s.heat.style.width = d.css + "px";
  s.heat.style.height = d.css + "px";
  s.images = d.heads.map((source) => {
    const img = document.createElement("img");
    if (source) img.src = source;
    img.alt = "";
    img.width = d.css;
    img.height = d.css;
    img.hidden = true;
    s.heat.appendChild(img);
    return img;
  });
  s.tip = document.createElement("div");
  s.tip.className = "tip";
  s.tip.hidden = true;
  const holder = document.createElement("div");
  holder.className = "grid";
  holder.append(s.heat, s.tip);
  s.heat.addEventListener("mousemove", (event) => hover(s, event));
  s.heat.addEventListener("mouseleave", () => { s.tip.hidden = true; });
  s.root.append(group, s.title, holder);
  pending(s);
  return s;
}

function pending(s) { // how many heads are still being pooled (for tests and assistive text)
  s.heat.dataset.pending = String(s.data.heads.filter((source) => !source).length);
}

// The same pooled layer with more heads (or new colours): the new images in place, the buttons and focus kept.
function samePicture(s, data) {
  const d = s.data;
  return d.kind === "image" && data.kind === "image" && d.layer === data.layer && d.n === data.n && d.pixels === data.pixels
    && d.css === data.css && d.how === data.how && d.heads.length === data.heads.length;
}

function update(s, data) {
  const waiting = s.head !== null && !s.data.heads[s.head];
  data.heads.forEach((source, h) => { if (source && source !== s.data.heads[h]) s.images[h].src = source; });
  s.data = data;
  pending(s);
  if (waiting && data.heads[s.head]) show(s, s.head);
}

// A short text's layer arrives as bytes (viz/head_cells.py to_wire): a JSON text's length (4 bytes, little-endian),
// the JSON (every field but the heads, and each head's size), then each head's packed codes.
function fromWire(wire) {
  const size = new DataView(wire.buffer, wire.byteOffset, 4).getUint32(0, true);
  const data = JSON.parse(new TextDecoder().decode(wire.subarray(4, 4 + size)));
  let at = 4 + size;
  data.heads = data.sizes.map((length) => { // a head of size 0 was not sent (yet): null
    const head = length ? wire.subarray(at, at + length) : null;
    at += length;
    return head;
  });
  return data;
}

export default function (component) {
  const { parentElement, setStateValue, setTriggerValue } = component;
  const data = component.data instanceof Uint8Array ? fromWire(component.data) : component.data;
  let s = states.get(parentElement);
  performance.mark("head-switch:data");
  if (s && s.digest !== data.digest && samePicture(s, data)) {
    update(s, data);
    s.digest = data.digest;
  } else if (s && s.digest === data.digest && s.data.partial && !data.partial) {
    fill(s, data);
  } else if (!s || s.digest !== data.digest) {
    s = build(parentElement, data);
    performance.mark("head-switch:built");
    s.digest = data.digest;
    states.set(parentElement, s);
    if (data.partial) { // the shown head alone: ask for the rest once it is painted (rAF, then the next task), and
      // again every 2 s while it has not arrived (a request can meet a run still going)
      let asked = 0;
      const ask = () => {
        if (!s.data.partial || states.get(parentElement) !== s) return;
        setTriggerValue("rest", `${data.digest}:${++asked}`);
        setTimeout(ask, 2000);
      };
      requestAnimationFrame(() => setTimeout(ask, 0));
    }
  }
  s.setStateValue = setStateValue;
  if (s.nonce !== data.nonce) { // the server chose the head (first draw, another control, a link): show it
    s.nonce = data.nonce;
    show(s, data.head);
  }
}
