#!/usr/bin/env python3
"""echo-bench.py: what an lm-evaluation-harness echo request costs through llbuild serve, against a
plain prefill of the same tokens sent straight to llama-server, measured from outside (this
process, standard library only), the two kinds interleaved one request each.

    echo-bench.py SHIM_URL LLAMA_URL [--llama-key KEY] [--tokens 128,512] [--pairs 15] [--warm 3]
                  [--shim-b URL --label-b NAME]

SHIM_URL is llbuild serve's address, LLAMA_URL the llama-server it supervises (scripts/echo-bench.sh
starts both from a bundle and finds the second in serve's log). The prompt is token ids (what
lm-eval's local-completions sends), cut from the tokenization of a text long enough for the
longest size. Per size: the median time to the last byte of each kind, to the first byte, the
answers' sizes, and echo/prefill as the ratio of the medians and the spread of the per-pair
ratios. Echo's Server-Timing header splits the shim's side: slot (waiting for a free slot),
llama (its calls to llama-server, sent to last byte) and shim (its own work); "hop" is the rest
of echo's time as this client saw it (the connection to the shim, reading the answer). A third
kind, "direct", is the request the shim makes for echo (native prompt logprobs in the form the
server's /props offers) sent straight to llama-server by this client: llama-server's own time to
the first and the last byte of it, so that echo less direct is what the shim costs end to end.
With --shim-b, a second llbuild serve of the same bundle (made otherwise: scripts/echo-bench.sh
starts it with LLBUILD_LLAMA_TRANSPORT=go, the shim calling llama-server through Go's transport)
gets the same echo request right after the first in each round: B's median, A/B as the ratio of
the medians, the per-pair A/B ratios' median and spread, and how many pairs A was faster in; and
each shim's own share (its echo less its calls of llama-server, by its Server-Timing), which
llama-server's spread does not reach: their medians, the per-pair ratio and how often A's was less.
"""
import argparse
import http.client
import json
import statistics
import sys
import time
import urllib.parse

TEXT = ("In the beginning God created the heaven and the earth. And the earth was without form, "
        "and void; and darkness was upon the face of the deep. And the Spirit of God moved upon the "
        "face of the waters. And God said, Let there be light: and there was light. ")


class Conn:
    """One kept-alive HTTP/1.1 connection to a server, as a client library keeps it."""

    def __init__(self, url, key=""):
        self.headers = {"Content-Type": "application/json"}
        if key:
            self.headers["Authorization"] = "Bearer " + key
        u = urllib.parse.urlsplit(url)
        self.host, self.port = u.hostname, u.port or 80
        self.c = http.client.HTTPConnection(self.host, self.port, timeout=600)

    def get(self, path):
        self.c.request("GET", path, headers=self.headers)
        r = self.c.getresponse()
        payload = r.read()
        if r.status != 200:
            sys.exit(f"GET {path}: {r.status} {payload[:300]!r}")
        return 0, 0, payload, ""

    def post(self, path, body):
        data = json.dumps(body).encode()
        for attempt in (1, 2):
            t0 = time.perf_counter()
            try:
                self.c.request("POST", path, body=data, headers=self.headers)
                r = self.c.getresponse()
                break
            except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
                # llama-server closes a kept-alive connection after a few seconds idle, as
                # servers do; a client library opens another and sends the request again
                self.c.close()
                self.c = http.client.HTTPConnection(self.host, self.port, timeout=600)
                if attempt == 2:
                    raise
        first = time.perf_counter()  # the status line and headers have arrived
        payload = r.read()
        last = time.perf_counter()
        if r.status != 200:
            sys.exit(f"POST {path}: {r.status} {payload[:300]!r}")
        return (first - t0) * 1e3, (last - t0) * 1e3, payload, r.getheader("Server-Timing", "")


def timing(header):
    out = {}
    for part in header.split(","):  # name;dur=MS;desc="..."
        name, *params = [x.strip() for x in part.split(";")]
        for p in params:
            if p.startswith("dur="):
                out[name] = float(p[4:])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("shim")
    ap.add_argument("llama")
    ap.add_argument("--tokens", default="128,512")
    ap.add_argument("--pairs", type=int, default=15)
    ap.add_argument("--warm", type=int, default=3)
    ap.add_argument("--llama-key", default="", help="llama-server's API key (echo-bench.sh reads it)")
    ap.add_argument("--shim-b", default="", help="a second shim to compare echo with, interleaved")
    ap.add_argument("--label-b", default="B")
    a = ap.parse_args()
    shim, llama = Conn(a.shim), Conn(a.llama, a.llama_key)
    shim_b = Conn(a.shim_b) if a.shim_b else None
    ab_rows = []
    warned = False
    sizes = [int(x) for x in a.tokens.split(",")]
    _, _, b, _ = llama.post("/tokenize", {"content": TEXT * (max(sizes) // 40 + 2), "add_special": True})
    ids = json.loads(b)["tokens"]
    if len(ids) < max(sizes):
        sys.exit(f"the text tokenizes to {len(ids)} tokens, fewer than {max(sizes)}")
    print(f"{'tokens':>6} {'prefill ms':>10} {'echo ms':>8} {'echo/prefill':>12} {'per pair':>13} "
          f"{'ttfb p/e':>11} {'bytes p/e':>13} {'slot':>5} {'llama':>6} {'shim':>5} {'hop':>5} "
          f"{'direct ttfb/last':>16} {'echo-direct':>11}")
    _, _, b, _ = llama.get("/props")
    props = json.loads(b)
    flat = bool(props.get("prompt_logprobs_flat"))
    b64 = flat and bool(props.get("prompt_logprobs_base64"))
    for n in sizes:
        prompt = ids[:n]
        direct = {"prompt": prompt, "n_predict": 1, "temperature": 0, "n_probs": 1, "cache_prompt": True,
                  "return_tokens": True, "prompt_logprobs": 1, "prompt_logprobs_flat": flat,
                  "prompt_logprobs_base64": b64,
                  "response_fields": ["content", "tokens", "stop", "stop_type", "tokens_predicted",
                                      "tokens_evaluated", "timings", "completion_probabilities",
                                      "prompt_logprobs_flat" if flat else "prompt_probabilities"]}
        prefill = {"prompt": prompt, "n_predict": 1, "temperature": 0, "cache_prompt": False}
        echo = {"prompt": [prompt], "max_tokens": 1, "logprobs": 1, "echo": True, "temperature": 0}
        p_last, e_last, p_first, e_first, pairs, split = [], [], [], [], [], {"slot": [], "llama": [], "shim": [], "hop": []}
        d_first, d_last, e_b, own_a, own_b = [], [], [], [], []
        sizes_seen = (0, 0)
        for i in range(a.warm + a.pairs):
            pf, pl, pb, _ = llama.post("/completion", prefill)
            if shim_b is not None and i % 2 == 1:  # B first every other round
                _, bl, bb, bst = shim_b.post("/v1/completions", echo)
                ef, el, eb, st = shim.post("/v1/completions", echo)
            else:
                ef, el, eb, st = shim.post("/v1/completions", echo)
                _, bl, bb, bst = shim_b.post("/v1/completions", echo) if shim_b is not None else (0.0, 0.0, b"", "")
            if shim_b is not None and bb != eb:
                a_j, b_j = json.loads(eb), json.loads(bb)
                for j in (a_j, b_j):  # the ids and times differ; the scores must not
                    j.pop("id", None), j.pop("created", None), j.pop("usage", None)
                if a_j != b_j and not warned:
                    print(f"warning: A's and B's answers differ for {n} tokens (besides id, created, usage)", file=sys.stderr)
                    warned = True
            df, dl, _, _ = llama.post("/completion", direct)
            if i < a.warm:
                continue
            t = timing(st)
            if shim_b is not None:
                e_b.append(bl)
                # each shim's own share: its echo less its calls of llama-server (the hop, its work
                # and any slot wait), free of llama-server's spread
                own_a.append(el - t.get("llama", 0.0))
                own_b.append(bl - timing(bst).get("llama", 0.0))
            d_first.append(df)
            d_last.append(dl)
            rows = json.loads(eb)["choices"][0]["logprobs"]["token_logprobs"]
            if len(rows) != n + 1:
                sys.exit(f"echo gave {len(rows)} rows for {n} tokens, want {n + 1}")
            p_last.append(pl)
            e_last.append(el)
            p_first.append(pf)
            e_first.append(ef)
            pairs.append(el / pl)
            for k in ("slot", "llama", "shim"):
                split[k].append(t.get(k, 0.0))
            split["hop"].append(el - sum(t.get(k, 0.0) for k in ("slot", "llama", "shim")))
            sizes_seen = (len(pb), len(eb))
        med = statistics.median
        pm, em = med(p_last), med(e_last)
        print(f"{n:>6} {pm:>10.2f} {em:>8.2f} {em / pm:>12.3f} {min(pairs):>6.3f}-{max(pairs):<6.3f} "
              f"{med(p_first):>5.2f}/{med(e_first):<5.2f} {sizes_seen[0]:>6}/{sizes_seen[1]:<6} "
              f"{med(split['slot']):>5.2f} {med(split['llama']):>6.2f} {med(split['shim']):>5.2f} {med(split['hop']):>5.2f} "
              f"{med(d_first):>7.2f}/{med(d_last):<8.2f} {em - med(d_last):>11.2f}")
        if shim_b is not None:
            r = [x / y for x, y in zip(e_last, e_b)]
            o = [x / y for x, y in zip(own_a, own_b)]
            ab_rows.append(f"{n:>6} {em:>9.2f} {med(e_b):>9.2f} {em / med(e_b):>6.3f} {med(r):>10.3f} "
                           f"{min(r):>6.3f}-{max(r):<6.3f} {sum(x < 1 for x in r):>3}/{len(r)} "
                           f"{med(own_a):>7.3f} {med(own_b):>7.3f} {med(o):>8.3f} {sum(x < 1 for x in o):>3}/{len(o)}")
    if ab_rows:
        print(f"\necho through A ({a.shim}) against B ({a.label_b}: {a.shim_b}), interleaved")
        print(f"{'tokens':>6} {'A echo ms':>9} {'B echo ms':>9} {'A/B':>6} {'pair A/B':>10} {'spread':>13} {'A faster':>8} "
              f"{'A own':>7} {'B own':>7} {'pair own':>8} {'A less':>6}")
        print("(own: echo less the shim's calls of llama-server, in ms: the hop, the shim's work, any slot wait)")
        for row in ab_rows:
            print(row)


if __name__ == "__main__":
    main()
