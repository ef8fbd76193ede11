// Node driver for bench/rspjs.py: replays timestamped N-Quads streams through rsp-js.
// Usage: node rspjs_driver.js SPEC.json   (SPEC: {query, streams:[{iri,path}], statics:[path]})
// Prints one JSON line: {parse_s, feed_eval_s, evaluations, rows, distinct_rows, triples,
// reports: {close time: [binding rows]}}.
"use strict";
const fs = require("fs");
const spec = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
const { RSPEngine } = require("rsp-js");
const N3 = require("n3");

// rsp-js logs every element with console.debug / console.log; silence it so the
// comparison measures evaluation, not terminal output.
console.debug = () => {};
console.log = () => {};
const out = (s) => process.stdout.write(s + "\n");

const GAT = "http://www.w3.org/ns/prov#generatedAtTime";

function parseStream(path) {
  const quads = new N3.Parser({ format: "N-Quads" }).parse(fs.readFileSync(path, "utf8"));
  const ts = new Map();
  const elements = [];
  const byGraph = new Map();
  for (const q of quads) {
    if (q.graph.termType === "DefaultGraph") {
      if (q.predicate.value === GAT) {
        ts.set(q.subject.value, Date.parse(q.object.value));
      }
      continue;
    }
    const g = q.graph.value;
    let el = byGraph.get(g);
    if (!el) {
      el = { t: ts.get(g), quads: [] };
      byGraph.set(g, el);
      elements.push(el);
    }
    el.quads.push(q);
  }
  return elements;
}

function term(t) {
  if (t.termType === "NamedNode") return "<" + t.value + ">";
  if (t.termType === "BlankNode") return "_:" + t.value;
  if (t.termType === "Literal") {
    const dt = t.datatype ? t.datatype.value : "";
    const v = JSON.stringify(t.value);
    if (t.language) return v + "@" + t.language;
    return dt && dt !== "http://www.w3.org/2001/XMLSchema#string" ? v + "^^<" + dt + ">" : v;
  }
  return String(t.value);
}

function row(bindings) {
  const r = {};
  for (const [k, v] of bindings) r[k.value] = term(v);
  return r;
}

async function main() {
  const t0 = process.hrtime.bigint();
  const engine = new RSPEngine(spec.query);
  // rsp-js appends every INFO line to ./logs/*.log by default; turn its logger off
  // (its own field) so the comparison measures evaluation, not logging.
  if (engine.logger) engine.logger.loggable_classes = [];
  const statics = [];
  for (const p of spec.statics) {
    for (const q of new N3.Parser({ format: "N-Triples" }).parse(fs.readFileSync(p, "utf8"))) statics.push(q);
  }
  for (const q of statics) engine.addStaticData(q);
  const feeds = [];
  for (const s of spec.streams) {
    const stream = engine.getStream(s.iri);
    if (!stream) throw new Error("query has no window on stream " + s.iri);
    for (const el of parseStream(s.path)) feeds.push({ t: el.t, quads: el.quads, stream });
  }
  // stable merge by event time (ties keep stream order, as the replay does)
  feeds.sort((a, b) => a.t - b.t);
  let triples = 0;
  for (const f of feeds) triples += f.quads.length;
  const t1 = process.hrtime.bigint();

  // Track every evaluation so the timer stops when the last one has finished.
  const pending = [];
  let evaluations = 0;
  const r2r = engine.r2r;
  const execute = r2r.execute.bind(r2r);
  // The close time of the window instance a report evaluates: rsp-js reports, when an
  // element with time t arrives, the instance with the largest close < t (closes are
  // multiples of STEP from time 0).  Recorded by a listener that runs before rsp-js's own.
  let lastClose = null;
  for (const w of engine.windows) {
    w.subscribe("RStream", () => {
      lastClose = Math.floor((w.time - 1) / w.slide) * w.slide;
    });
  }
  const byClose = {};
  r2r.execute = (container) => {
    evaluations += 1;
    const close = lastClose;
    const p = execute(container);
    pending.push(
      p.then(
        (bs) => {
          const rowsAt = byClose[close] || (byClose[close] = []);
          bs.on("data", (b) => rowsAt.push(row(b)));
          return bs.done || bs.ended
            ? undefined
            : new Promise((res) => { bs.on("end", res); bs.on("error", res); });
        },
        () => undefined
      )
    );
    return p;
  };
  const emitter = engine.register();
  let rows = 0;
  const distinct = new Set();
  emitter.on("RStream", (obj) => {
    rows += 1;
    distinct.add(JSON.stringify(row(obj.bindings)));
  });
  // Feed element by element, letting the evaluations an element triggered finish before
  // the next one (as a live engine keeps up; queuing them all at once exhausts the heap,
  // since rsp-js copies the window and the static data into a new store per evaluation).
  for (const f of feeds) {
    for (const q of f.quads) f.stream.add(q, f.t);
    while (pending.length) await pending.shift();
  }
  const t2 = process.hrtime.bigint();
  out(
    JSON.stringify({
      parse_s: Number(t1 - t0) / 1e9,
      feed_eval_s: Number(t2 - t1) / 1e9,
      evaluations,
      rows,
      distinct_rows: distinct.size,
      triples,
      reports: byClose,
    })
  );
}

main().catch((e) => {
  process.stderr.write("rsp-js driver: " + (e && e.stack ? e.stack : e) + "\n");
  process.exit(1);
});
