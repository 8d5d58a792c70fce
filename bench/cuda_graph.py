"""A torch call captured in a CUDA graph, shared by the anchors: its replay is the
call's GPU time without Python's and the launches' host cost."""

import torch


def capture(fn):
    """fn captured in a CUDA graph, after a warm-up on a side stream as torch's docs
    do it. Returns the graph's replay and the tensor fn returned, which each replay
    writes again."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()
    return graph.replay, out
