#!/usr/bin/env python3
"""Build a real-text JSONL corpus offline from what Debian installs: package documentation
(copyright files, READMEs, changelogs) and manual pages (roff markup stripped). Real text
repeats itself (licence texts, boilerplate), which is what a dedup benchmark wants.

    python3 benches/peers/make_corpus.py OUT.jsonl [--docs 50000] [--words 150]

Documents are cut from each source at paragraph boundaries into pieces of about --words words.
The output is deterministic for a given machine (sources are visited in sorted order); the
number of documents, words and bytes is printed so a run can be compared with another.
"""
import argparse
import gzip
import json
import os
import re
import sys

ROFF_ESCAPE = re.compile(r"\\f[BIRP]|\\f\(..|\\\(..|\\[-e&|^ ]|\\s[-+]?\d|\\\*\(..|\\\*.")


def text_of(path):
    try:
        if path.endswith(".gz"):
            with gzip.open(path, "rb") as f:
                raw = f.read(4 << 20)
        else:
            with open(path, "rb") as f:
                raw = f.read(4 << 20)
    except OSError:
        return ""
    if b"\x00" in raw[:4096]:
        return ""
    text = raw.decode("utf-8", "replace")
    if "/man/" in path:
        lines = []
        for line in text.splitlines():
            if line.startswith((".", "'")):
                # Keep the words of headings and font macros, drop other requests.
                m = re.match(r"^[.'](SH|SS|B|I|BR|IR|RB|RI|BI|IB|TP|IP)\b\s*(.*)$", line)
                if m and m.group(2):
                    lines.append(m.group(2).replace('"', ""))
                elif line.strip() in (".PP", ".P", ".LP", ".sp", ".br"):
                    lines.append("")
                continue
            lines.append(ROFF_ESCAPE.sub("", line))
        text = "\n".join(lines)
    return text


def sources():
    roots = ["/usr/share/doc", "/usr/share/man", "/usr/share/common-licenses"]
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            for name in sorted(filenames):
                p = os.path.join(dirpath, name)
                if os.path.islink(p) or not os.path.isfile(p):
                    continue
                if name.endswith((".html", ".png", ".jpg", ".svg", ".pdf", ".css", ".js")):
                    continue
                yield p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--docs", type=int, default=50000)
    ap.add_argument("--words", type=int, default=150)
    a = ap.parse_args()
    n = words = size = 0
    with open(a.out, "w", encoding="utf-8") as out:
        for path in sources():
            paras = re.split(r"\n\s*\n", text_of(path))
            piece, count, part = [], 0, 0
            for para in paras:
                w = len(para.split())
                if w == 0:
                    continue
                piece.append(para.strip())
                count += w
                if count >= a.words:
                    doc = "\n\n".join(piece)
                    out.write(json.dumps({"id": f"{path}#{part}", "text": doc}, ensure_ascii=False) + "\n")
                    n, words, size, part = n + 1, words + count, size + len(doc), part + 1
                    piece, count = [], 0
                    if n >= a.docs:
                        break
            if piece and count >= 20 and n < a.docs:
                doc = "\n\n".join(piece)
                out.write(json.dumps({"id": f"{path}#{part}", "text": doc}, ensure_ascii=False) + "\n")
                n, words, size = n + 1, words + count, size + len(doc)
            if n >= a.docs:
                break
    print(f"{a.out}: {n} documents, {words} words (whitespace-split), {size / 1e6:.1f} MB of text", file=sys.stderr)


if __name__ == "__main__":
    main()
