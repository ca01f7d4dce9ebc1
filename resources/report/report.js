(function(){
const DATA = JSON.parse(document.getElementById('gx-data').textContent);
function ema(y, w){ // TensorBoard's debiased EMA; non-finite (null) points pass through
  const finite = y.filter(v => v !== null && isFinite(v));
  if (w <= 0 || !finite.length || finite.every(v => v === finite[0])) return y.slice();
  let last = 0, k = 0; return y.map(v => {
    if (v === null || !isFinite(v)) return v;
    last = last * w + (1 - w) * v; k += 1; return last / (1 - Math.pow(w, k)); });
}
function path(svg, x, y){
  const d = svg.dataset, box = d.box.split(' ').map(Number), log = d.log === '1';
  const x0 = +d.x0, x1 = +d.x1, y0 = log ? Math.log10(+d.y0) : +d.y0, y1 = log ? Math.log10(+d.y1) : +d.y1;
  const cols = new Map(); let out = '';
  x.forEach((xv, i) => { let v = y[i]; if (v === null || !isFinite(v) || (log && v <= 0)) return;
    v = log ? Math.log10(v) : v; const px = box[0] + (xv - x0) / ((x1 - x0) || 1) * box[2];
    const py = box[1] + (1 - (v - y0) / ((y1 - y0) || 1)) * box[3], c = Math.round(px);
    const m = cols.get(c); if (!m) cols.set(c, [px, py, py]); else { m[1] = Math.min(m[1], py); m[2] = Math.max(m[2], py); } });
  [...cols.keys()].sort((a, b) => a - b).forEach((c, j) => { const m = cols.get(c);
    out += (j ? 'L' : 'M') + m[0].toFixed(1) + ' ' + m[1].toFixed(1) + (m[2] > m[1] ? 'L' + m[0].toFixed(1) + ' ' + m[2].toFixed(1) : ''); });
  return out;
}
function redraw(w){
  document.querySelectorAll('svg[data-key]').forEach(svg => { const c = DATA.curves[svg.dataset.key]; if (!c) return;
    svg.querySelectorAll('path[data-series]').forEach(p => { const s = c.series[+p.dataset.series];
      p.setAttribute('d', path(svg, s.x || c.x, ema(s.y, w))); }); });
}
const slider = document.getElementById('smoothing'), shown = document.getElementById('smoothing-value');
if (slider) slider.addEventListener('input', () => { const w = Math.min(0.999, +slider.value);
  shown.textContent = w.toFixed(3); redraw(w); });
// text a spreadsheet would evaluate as a formula (=, +, -, @, tab, CR) gets a leading quote
// (as core/printable.py spreadsheet_cell does for the app's CSV); numbers such as -0.5 stay numbers
const cell = s => JSON.stringify(/^[=+\-@\t\r]/.test(s) && isNaN(Number(s)) ? "'" + s : s);
function download(name, text){ const a = document.createElement('a');
  a.href = URL.createObjectURL(new Blob([text], {type: 'text/csv'})); a.download = name; a.click(); }
document.querySelectorAll('button[data-csv]').forEach(b => b.addEventListener('click', () => {
  const c = DATA.curves[b.dataset.csv]; let t;
  if (c.series.some(s => s.x)) {  // runs overlaid, each on its own steps: long form
    t = 'run,step,value\n'; c.series.forEach(s => s.x.forEach((x, i) => {
      t += cell(s.label) + ',' + x + ',' + (s.y[i] === null ? '' : s.y[i]) + '\n'; }));
  } else {
    t = 'step,' + c.series.map(s => cell(s.label)).join(',') + '\n';
    c.x.forEach((x, i) => { t += x + ',' + c.series.map(s => s.y[i] === null ? '' : s.y[i]).join(',') + '\n'; });
  }
  download(b.dataset.csv + '.csv', t); }));
document.querySelectorAll('button[data-table]').forEach(b => b.addEventListener('click', () => {
  const rows = [...document.getElementById(b.dataset.table).querySelectorAll('tr')];
  download(b.dataset.table + '.csv', rows.map(r => [...r.children].map(c => c.dataset.v !== undefined ? JSON.stringify(c.dataset.v) : cell(c.textContent)).join(',')).join('\n') + '\n'); }));
document.querySelectorAll('table.sortable th').forEach((th, col) => th.addEventListener('click', () => {
  const body = th.closest('table').tBodies[0], rows = [...body.rows], dir = th.dataset.dir = th.dataset.dir === 'd' ? 'a' : 'd';
  const key = r => { const c = r.children[col], v = c.dataset.v ?? c.textContent; const n = v === 'nan' || v === 'inf' ? Infinity : v === '-inf' ? -Infinity : parseFloat(v); return isNaN(n) ? v : n; };  // a NaN/Inf figure sorts as the largest
  rows.sort((a, b) => { const x = key(a), y = key(b); const o = x < y ? -1 : x > y ? 1 : 0; return dir === 'd' ? -o : o; });
  rows.forEach(r => body.appendChild(r)); }));
const asked = location.hash.match(/smoothing=([0-9.]+)/);  // report.html#smoothing=0.9 opens smoothed
if (asked && slider) { slider.value = asked[1]; slider.dispatchEvent(new Event('input')); }
document.body.dataset.ready = '1';
})();
