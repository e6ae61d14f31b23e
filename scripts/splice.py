"""Replace the text between `<!-- NAME:begin -->` and `<!-- NAME:end -->` in FILE with CONTENT's.

    python3 scripts/splice.py FILE NAME CONTENT
"""

import sys


def main():
    path, name, content = sys.argv[1:4]
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if text.count(begin) != 1 or text.count(end) != 1:
        sys.exit(f"{path}: expected one {begin} and one {end}")
    with open(content, encoding="utf-8") as f:
        new = f.read()
    head, rest = text.split(begin)
    _, tail = rest.split(end)
    with open(path, "w", encoding="utf-8") as f:
        f.write(f"{head}{begin}\n{new}{end}{tail}")


if __name__ == "__main__":
    main()
