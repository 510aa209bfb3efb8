// Loads a report.html in headless Chromium (Debian's /usr/bin/chromium, driven by
// playwright-core) as a person would: from file://, with no network. Prints one JSON
// object on stdout: console and page errors, each flamegraph's state before and after a
// click on one of its frames, and the number of distinct colours of a screenshot of the
// top of the page (saved to the second argument).
//
// usage: node chromium_check.js REPORT.html SCREENSHOT.png
'use strict';
const path = require('path');
const { chromium } = require('playwright-core');

async function clickAFrame(page, id) {
  const handle = await page.$('#' + id);
  if (!handle) return { error: 'no iframe #' + id };
  const frame = await handle.contentFrame();
  await frame.waitForSelector('#frames > g', { state: 'attached', timeout: 10000 });
  // The frame to click: the widest one narrower than 90% of the root, so a zoom must
  // widen it.
  const pick = await frame.evaluate(() => {
    const gs = Array.from(document.querySelectorAll('#frames > g'));
    const w = (g) => { const r = g.querySelector('rect'); return r ? r.getBoundingClientRect().width : 0; };
    const root = Math.max(...gs.map(w));
    const cands = gs.map((g, i) => ({ i, w: w(g) })).filter((c) => c.w < 0.9 * root && c.w > 4);
    cands.sort((a, b) => b.w - a.w);
    return { root, cand: cands[0] || null, frames: gs.length };
  });
  if (!pick.cand) return { error: 'no frame narrower than the root', pick };
  const state = () => frame.evaluate((i) => {
    const g = document.querySelectorAll('#frames > g')[i];
    const r = g.querySelector('rect');
    const unzoom = document.getElementById('unzoom');
    return {
      width: r.getBoundingClientRect().width,
      unzoomHidden: unzoom ? unzoom.classList.contains('hide') : null,
      title: (g.querySelector('title') || {}).textContent || '',
    };
  }, pick.cand.i);
  const before = await state();
  const g = (await frame.$$('#frames > g'))[pick.cand.i];
  await g.click();
  await page.waitForTimeout(300);
  const after = await state();
  return { frames: pick.frames, root: pick.root, before, after };
}

async function distinctColours(browser, png) {
  const page = await browser.newPage();
  const n = await page.evaluate(async (b64) => {
    const img = new Image();
    img.src = 'data:image/png;base64,' + b64;
    await img.decode();
    const c = document.createElement('canvas');
    c.width = img.width; c.height = img.height;
    const ctx = c.getContext('2d');
    ctx.drawImage(img, 0, 0);
    const d = ctx.getImageData(0, 0, c.width, c.height).data;
    const seen = new Set();
    for (let i = 0; i < d.length; i += 4) seen.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
    return { colours: seen.size, width: img.width, height: img.height };
  }, png.toString('base64'));
  await page.close();
  return n;
}

(async () => {
  const [file, shot] = process.argv.slice(2);
  const browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const out = { consoleErrors: [], pageErrors: [], requests: [] };
  try {
    const page = await browser.newPage({ viewport: { width: 1200, height: 1600 } });
    page.on('console', (m) => { if (m.type() === 'error') out.consoleErrors.push(m.text()); });
    page.on('pageerror', (e) => out.pageErrors.push(String(e)));
    page.on('request', (r) => { const u = r.url(); if (!u.startsWith('file:') && !u.startsWith('data:') && !u.startsWith('about:')) out.requests.push(u); });
    await page.goto('file://' + path.resolve(file), { waitUntil: 'load' });
    out.wall = await clickAFrame(page, 'flame-wall');
    out.cpu = await clickAFrame(page, 'flame-cpu');
    // Sorting: click the hotspots table's first header twice, read the first column.
    const firstColumn = () => page.$$eval('#hotspots + table tbody tr', (rs) => rs.map((r) => r.cells[0].textContent));
    const asRendered = await firstColumn();
    const th = await page.$('#hotspots + table th');
    if (th) { await th.click(); }
    const once = await firstColumn();
    if (th) { await th.click(); }
    out.sort = { asRendered, once, twice: await firstColumn() };
    await page.evaluate(() => window.scrollTo(0, 0));
    const png = await page.screenshot({ path: shot, fullPage: false });
    out.screenshot = await distinctColours(browser, png);
  } catch (e) {
    out.fatal = String(e && e.stack || e);
  } finally {
    await browser.close();
  }
  process.stdout.write(JSON.stringify(out) + '\n');
})();
