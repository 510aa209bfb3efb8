"""Checks an HTML file as the report tests need: every element opened is closed, in
order (void elements and SVG's self-closing tags aside), and no src, href, xlink:href
or CSS url() points to http:// or https://. Also looks inside each iframe's srcdoc
for the same network references. Prints one JSON object: {"problems": [...],
"iframes": [ids], "tags": count}.

usage: python3 wellformed.py REPORT.html
"""
import json
import re
import sys
from html.parser import HTMLParser

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta",
        "source", "track", "wbr"}
NET = re.compile(r"^\s*https?://", re.I)
URL = re.compile(r"url\(\s*['\"]?\s*https?://", re.I)


class Check(HTMLParser):
    def __init__(self, where):
        super().__init__(convert_charrefs=True)
        self.where = where
        self.stack = []
        self.problems = []
        self.iframes = []
        self.srcdocs = []
        self.tags = 0
        self.in_style = False

    def attrs(self, tag, attrs):
        for k, v in attrs:
            if v is None:
                continue
            if k in ("src", "href", "xlink:href", "action", "poster") and NET.search(v):
                self.problems.append(f"{self.where}: <{tag} {k}={v!r}> reaches the network")
            if k == "style" and URL.search(v):
                self.problems.append(f"{self.where}: <{tag} style> has a url() to the network")
        if tag == "iframe":
            d = dict(attrs)
            self.iframes.append(d.get("id"))
            if d.get("srcdoc") is not None:
                self.srcdocs.append((d.get("id"), d["srcdoc"]))

    def handle_starttag(self, tag, attrs):
        self.tags += 1
        self.attrs(tag, attrs)
        self.in_style = tag == "style"
        if tag not in VOID:
            self.stack.append((tag, self.getpos()))

    def handle_startendtag(self, tag, attrs):
        self.tags += 1
        self.attrs(tag, attrs)

    def handle_endtag(self, tag):
        self.in_style = False
        if tag in VOID:
            return
        if not self.stack:
            self.problems.append(f"{self.where}: </{tag}> at {self.getpos()} closes nothing")
            return
        top, pos = self.stack.pop()
        if top != tag:
            self.problems.append(
                f"{self.where}: </{tag}> at {self.getpos()} closes <{top}> opened at {pos}")

    def handle_data(self, data):
        if self.in_style and URL.search(data):
            self.problems.append(f"{self.where}: a stylesheet url() reaches the network")


def check(text, where):
    c = Check(where)
    c.feed(text)
    c.close()
    for tag, pos in c.stack:
        c.problems.append(f"{where}: <{tag}> opened at {pos} is never closed")
    return c


def main():
    text = open(sys.argv[1], encoding="utf-8").read()
    page = check(text, "page")
    problems = list(page.problems)
    for fid, doc in page.srcdocs:
        inner = check(doc, f"iframe {fid}")
        # Inside the SVG, only network references count (inferno's SVG is XML-ish).
        problems += [p for p in inner.problems if "network" in p]
    print(json.dumps({"problems": problems, "iframes": page.iframes, "tags": page.tags}))


if __name__ == "__main__":
    main()
