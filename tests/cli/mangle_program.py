#!/usr/bin/env python3
"""mangle_program.py SRC DST SEED: writes to DST the text of SRC with one to
three random edits chosen by SEED (test_transform_mangled.sh): a line
deleted, duplicated or swapped with another, a block of lines deleted, the
text cut short, a punctuation character deleted, a token inserted (a brace,
a parenthesis, a quote, a comment opener, a backslash, a launch's <<< or
>>>), or a name replaced by another name of the file."""
import random
import re
import sys

INSERTS = ['{', '}', '(', ')', '"', "'", '/*', '//', '\\', '#', '<<<', '>>>', ';']


def mangle(text, rng):
    lines = text.split('\n')
    kind = rng.randrange(8)
    if kind == 0:
        del lines[rng.randrange(len(lines))]
    elif kind == 1:
        return text[:rng.randrange(len(text))]
    elif kind == 2:
        i = rng.randrange(len(lines))
        lines.insert(i, lines[i])
    elif kind == 3:
        marks = [i for i, ch in enumerate(text) if ch in '{}()[];,<>"\'*&#']
        i = rng.choice(marks)
        return text[:i] + text[i + 1:]
    elif kind == 4:
        i = rng.randrange(len(text))
        return text[:i] + rng.choice(INSERTS) + text[i:]
    elif kind == 5:
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    elif kind == 6:
        i = rng.randrange(len(lines))
        del lines[i:i + rng.randrange(1, 30)]
    else:
        names = re.findall(r'[A-Za-z_]\w*', text)
        a, b = rng.choice(names), rng.choice(names)
        return re.sub(r'\b%s\b' % re.escape(a), b, text, count=rng.randrange(1, 4))
    return '\n'.join(lines)


def main():
    src, dst, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rng = random.Random(seed)
    with open(src, errors='replace') as f:
        text = f.read()
    for _ in range(rng.randrange(1, 4)):
        if text:
            text = mangle(text, rng)
    with open(dst, 'w') as f:
        f.write(text)


if __name__ == '__main__':
    main()
