//! The page's frame: document head, inline CSS, the navigation and the small inline
//! script that sorts tables on a header click. No external resource of any kind: no
//! link, font, image or script is fetched, so the file opens offline.
//!
//! Invariants: the script only reorders rows of `table.sortable` (without it the rows
//! stay as rendered, by share); it holds no `</` so it cannot end its element early.

use std::fmt::Write;

use super::esc;

const CSS: &str = "\
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:0;\
color:#1d2329;background:#f6f7f9}\
main{max-width:1280px;margin:0 auto;padding:12px 24px 48px}\
header{background:#fff;border:1px solid #dde1e6;border-radius:6px;padding:8px 18px;margin:12px 0}\
h1{margin:6px 0;font-size:24px}h2{margin:28px 0 8px;font-size:19px;border-bottom:2px solid #dde1e6;scroll-margin-top:36px}\
h3{font-size:15px}dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:6px 0}\
dt{color:#5a6570}dd{margin:0}code{font:12.5px ui-monospace,monospace;background:#eef0f3;padding:1px 4px;\
border-radius:3px;word-break:break-all}\
.verdict{font-size:15px}.badge{display:inline-block;background:#c0392b;color:#fff;border-radius:4px;\
padding:1px 8px;font-weight:600;font-size:13px}\
nav{position:sticky;top:0;background:#f6f7f9ee;padding:6px 0;font-size:13px;z-index:1}\
nav a{margin-right:12px;color:#2c5d8f;text-decoration:none}\
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:10px 0}\
.card{background:#fff;border:1px solid #dde1e6;border-radius:6px;padding:8px 14px;min-width:150px}\
.card .k{color:#5a6570;font-size:12px}.card .v{font-size:17px;font-weight:600}\
table{border-collapse:collapse;background:#fff;margin:6px 0 12px;font-size:13px}\
th,td{border:1px solid #dde1e6;padding:3px 8px;text-align:left;vertical-align:top}\
th{background:#eef0f3}td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}\
table.sortable th{cursor:pointer}table.sortable th[data-dir=asc]::after{content:' \\25B2'}\
table.sortable th[data-dir=desc]::after{content:' \\25BC'}\
ol.bottlenecks>li{margin:6px 0}ul.why{margin:2px 0;color:#3c4650}\
figure.flame{margin:8px 0 18px}figure.flame iframe{width:100%;border:1px solid #dde1e6;background:#fff}\
figcaption{font-weight:600;margin:4px 0}\
.plots{display:flex;flex-wrap:wrap;gap:10px}.plot{background:#fff;border:1px solid #dde1e6}";

const SORT_JS: &str = r#"(function(){
function key(r,i){var c=r.cells[i];var s=c?c.textContent.trim():'';
return /^-?\d+(\.\d+)?$/.test(s)?parseFloat(s):s;}
var ts=document.querySelectorAll('table.sortable');
for(var t=0;t<ts.length;t++){(function(table){
var hs=table.tHead.rows[0].cells;
for(var i=0;i<hs.length;i++){(function(th,i){th.addEventListener('click',function(){
var desc=th.getAttribute('data-dir')!=='desc';
for(var j=0;j<hs.length;j++){hs[j].removeAttribute('data-dir');}
th.setAttribute('data-dir',desc?'desc':'asc');
var body=table.tBodies[0];var rows=Array.prototype.slice.call(body.rows);
rows.sort(function(a,b){var x=key(a,i),y=key(b,i),c;
if(typeof x==='number'&&typeof y==='number'){c=x-y;}
else if(typeof x==='number'){c=1;}else if(typeof y==='number'){c=-1;}
else{c=x.localeCompare(y);}return desc?-c:c;});
for(var k=0;k<rows.length;k++){body.appendChild(rows[k]);}
});})(hs[i],i);}
})(ts[t]);}
})();"#;

/// The sections the navigation links to: (anchor, label).
pub const NAV: &[(&str, &str)] = &[
    ("bottlenecks", "Bottlenecks"),
    ("flamegraphs", "Flamegraphs"),
    ("timeline", "Timeline"),
    ("hotspots", "Hotspots"),
    ("steps", "Steps"),
    ("baseline", "Baseline"),
    ("quality", "Quality"),
];

/// Everything before the page's sections.
pub fn open(o: &mut String, title: &str) {
    let _ = writeln!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{}</title><style>{CSS}</style></head><body><main>",
        esc::text(title)
    );
}

/// The navigation bar.
pub fn nav(o: &mut String) {
    o.push_str("<nav>");
    for (id, label) in NAV {
        let _ = write!(o, "<a href=\"#{id}\">{label}</a>");
    }
    o.push_str("</nav>\n");
}

/// Everything after the page's sections.
pub fn close(o: &mut String) {
    let _ = writeln!(o, "</main><script>{SORT_JS}</script></body></html>");
}
