/** The page's only stylesheet, inline: no asset to serve, no build step. */
export const STYLESHEET = `
*{box-sizing:border-box}
body{margin:0;font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1d232a;background:#f6f7f9}
header{padding:8px 16px;background:#1d232a;color:#e8eaed;display:flex;flex-wrap:wrap;gap:4px 12px;align-items:baseline;overflow-wrap:anywhere}
header .home{color:#fff;font-weight:600;text-decoration:none}
header .muted{color:#aab1ba}
main{padding:8px 16px 32px;max-width:1400px}
h1{font-size:20px;margin:12px 0;overflow-wrap:anywhere}
h2{font-size:16px;margin:20px 0 8px}
a{color:#0b57d0}
code{font:12px ui-monospace,SFMono-Regular,Menlo,monospace;overflow-wrap:anywhere}
.muted{color:#5f6b7a}.small{font-size:12px}.none{color:#8a94a0}
.tiles{display:grid;grid-template-columns:repeat(auto-fill,minmax(140px,1fr));gap:8px}
.tile{background:#fff;border:1px solid #dde1e6;border-left-width:4px;border-radius:4px;padding:6px 10px}
.tile .label{font-size:12px;color:#5f6b7a}.tile .value{font-size:18px;font-weight:600}
.tile.ok{border-left-color:#1e8e3e}.tile.bad{border-left-color:#d93025}.tile.warn{border-left-color:#e37400}
.filters{display:flex;flex-wrap:wrap;gap:6px;margin:0 0 8px}
.filters a{padding:3px 10px;border:1px solid #c4cad1;border-radius:12px;background:#fff;text-decoration:none;color:#1d232a}
.filters a.active{background:#1d232a;color:#fff;border-color:#1d232a}
.filters .count{font-size:12px;opacity:.75}
.scroll{overflow-x:auto;-webkit-overflow-scrolling:touch;background:#fff;border:1px solid #dde1e6;border-radius:4px}
table{border-collapse:collapse;width:100%}
th,td{padding:5px 8px;text-align:left;vertical-align:top;border-bottom:1px solid #eceff2}
th{font-size:12px;color:#5f6b7a;font-weight:600;white-space:nowrap;background:#fafbfc}
td.num,th.num{text-align:right;white-space:nowrap}
/* Node ids, hosts, versions: long words that may break anywhere, so that their table fits. */
td.id{overflow-wrap:anywhere;min-width:6em}
td.name{font-weight:600;overflow-wrap:anywhere;min-width:8em}
/* A wall time (the only <time> with a <span>: date <span>clock zone</span>) may wrap after its date. */
time{white-space:nowrap}time:has(>span){white-space:normal}time>span{white-space:nowrap}.rel{color:#5f6b7a;font-size:12px;white-space:nowrap}
/* A badge wraps rather than cut its text (a whole word breaks only if it is wider than the column). */
.badge{display:inline-block;max-width:100%;padding:0 6px;border-radius:3px;font-size:12px;font-weight:600;white-space:normal;overflow-wrap:break-word;border:1px solid transparent}
.badge.ok{background:#e6f4ea;color:#137333;border-color:#a8dab5}
.badge.bad{background:#fce8e6;color:#a50e0e;border-color:#f5b7b1}
.badge.warn{background:#fef7e0;color:#8a4b00;border-color:#f9d88a}
.badge.busy{background:#e8f0fe;color:#174ea6;border-color:#aecbfa}
.badge.idle{background:#f1f3f4;color:#3c4043;border-color:#dadce0}
.badge .reason{font-weight:400}
/* In a table sized by its content a status stays whole (its column widens; a reason may wrap); the jobs table's columns are fixed, so there it wraps too. */
td .badge{white-space:nowrap}td .badge .reason{white-space:normal}table.jobs .badge{white-space:normal}
.bad-text{color:#a50e0e;font-weight:600}
.error{color:#a50e0e;font:12px ui-monospace,SFMono-Regular,Menlo,monospace;overflow-wrap:anywhere;min-width:14em;max-width:40em}
.runlog{white-space:pre-wrap;overflow-wrap:anywhere;background:#f6f7f9;padding:6px;font-size:12px;line-height:1.45}.runlog .lv-warn{color:#8a5a00}.runlog .lv-error,.runlog .lv-fatal{color:#b3261e}.runlog .note{font-style:italic}.output summary{cursor:pointer;color:#5f6b7a}.output pre{margin:4px 0;max-height:20em;overflow:auto;white-space:pre-wrap;overflow-wrap:anywhere;color:#1d232a;background:#f6f7f9;padding:4px}
tr.dst td{background:#fffbeb}
.jobs-wide{min-width:1000px}
.chunk{content-visibility:auto;contain-intrinsic-size:auto 3400px}
table.jobs{table-layout:fixed}
col.c-name{width:16%}col.c-schedule{width:11%}col.c-zone{width:10%}col.c-next{width:17%}col.c-last{width:20%}col.c-running{width:8%}col.c-paused{width:10%}col.c-counts{width:8%}
table.jobs td{overflow-wrap:anywhere}table.jobs .error{min-width:0}
/* Fixed columns: a header or a count wraps at its spaces rather than run into the next column. */
table.jobs th,table.jobs td.num{white-space:normal}
.actions{display:flex;flex-wrap:wrap;gap:6px;align-items:center;margin:0 0 10px}
button.act{font:inherit;font-size:13px;padding:3px 10px;border:1px solid #c4cad1;border-radius:4px;background:#fff;color:#1d232a;cursor:pointer}
button.act:hover{background:#eef1f4}button.act:disabled{opacity:.6;cursor:progress}
.action-result{font-size:13px;overflow-wrap:anywhere}.action-result.ok{color:#137333}.action-result.bad{color:#a50e0e}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:0}
dl.facts dt{color:#5f6b7a}dl.facts dd{margin:0;overflow-wrap:anywhere}
ul.invalid{margin:0;padding-left:20px;overflow-wrap:anywhere}
@media (max-width:600px){
  main{padding:8px 8px 24px}
  .wide{display:none}
  th,td{padding:4px 6px}
  .error{max-width:16em}
  col.wide{display:none}
  .jobs-wide{min-width:720px}
  col.c-name{width:23%}col.c-next{width:22%}col.c-last{width:28%}col.c-running{width:13%}col.c-paused{width:14%}
}
`;
