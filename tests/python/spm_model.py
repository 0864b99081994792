"""A SentencePiece tokenizer.model written as protobuf bytes with the standard library only: a BPE model
with byte fallback (the 256 <0xNN> pieces), three control pieces and a few merged pieces. Shared by
test_hf_llama.py and bench/convert_gguf.py (which builds a large Llama folder around it)."""

import struct


def _varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        out += bytes([b | (0x80 if n else 0)])
        if not n:
            return out


def _field(num, wire, payload):
    key = _varint(num << 3 | wire)
    if wire == 0:
        return key + _varint(payload)
    if wire == 5:
        return key + struct.pack("<f", payload)
    return key + _varint(len(payload)) + payload


SPM_MERGED = ["\u2581t", "he", "\u2581the", "ll", "\u2581he", "llo", "\u2581hello", "\u2581w", "or", "\u2581wor", "ld",
              "\u2581world", "\u2581h", "el", "lo", "\u2581hel"]
SPM_CHARS = ["\u2581", "h", "e", "l", "o", "w", "r", "d", "t", ",", "4"]


def spm_pieces():
    pieces = [("<unk>", 0.0, 2), ("<s>", 0.0, 3), ("</s>", 0.0, 3)]
    pieces += [(f"<0x{b:02X}>", 0.0, 6) for b in range(256)]
    pieces += [(p, -float(i), 1) for i, p in enumerate(SPM_MERGED)]
    pieces += [(p, -100.0 - i, 1) for i, p in enumerate(SPM_CHARS)]
    return pieces


def spm_model(pieces):
    body = b""
    for text, score, typ in pieces:
        body += _field(1, 2, _field(1, 2, text.encode()) + _field(2, 5, score) + _field(3, 0, typ))
    trainer = _field(3, 0, 2) + _field(4, 0, len(pieces)) + _field(35, 0, 1)  # BPE, vocab size, byte_fallback
    normalizer = _field(1, 2, b"identity") + _field(3, 0, 1) + _field(4, 0, 0) + _field(5, 0, 1)
    return body + _field(2, 2, trainer) + _field(3, 2, normalizer)
