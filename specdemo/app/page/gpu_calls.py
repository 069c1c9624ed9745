"""The GPU functions: each models' function run under ``spaces.GPU`` on ZeroGPU with its
request's own seconds (``on_gpu``), or as ZeroGPU would run it, for tests off ZeroGPU
(``EMULATION``: each call in a fresh fork, or only its arguments and results pickled).
"""

import functools
import inspect
import multiprocessing
import os
import pickle

from specdemo.app.page import gpu, gpu_notes

try:  # Hugging Face's ZeroGPU decorator, on Spaces; a no-op off ZeroGPU.
    import spaces
except ImportError:
    spaces = None

# Set to "fork" or "pickle" to run GPU functions as ZeroGPU does, off ZeroGPU: "fork" runs each
# call in a fresh fork of this process, "pickle" only pickles what crosses (for a real GPU,
# where a fork cannot use CUDA the parent started).
EMULATION = os.environ.get("SPECDEMO_ZEROGPU_EMULATION", "")


def on_gpu(fn):
    """`fn(request, ...)` as a GPU function: under spaces.GPU with the request's own seconds on
    ZeroGPU, emulated as set in EMULATION, unchanged everywhere else. Call it once per function,
    before the app launches (ZeroGPU registers its GPU functions at launch)."""
    if EMULATION == "fork":
        return forked(fn)
    if EMULATION == "pickle":
        return pickled(fn)
    if spaces is None or not gpu.limited():
        return fn
    return gpu_notes.explained(spaces.GPU(duration=lambda request, *_, **__: request.seconds)(fn))


def pickled(fn):
    """`fn` with its arguments and every value it returns or yields pickled and read back."""

    def copy(value):
        return pickle.loads(pickle.dumps(value))

    if inspect.isgeneratorfunction(fn):

        @functools.wraps(fn)
        def stream(*args, **kwargs):
            for item in fn(*copy(args), **copy(kwargs)):
                yield copy(item)

        return stream

    @functools.wraps(fn)
    def call(*args, **kwargs):
        return copy(fn(*copy(args), **copy(kwargs)))

    return call


def forked(fn):
    """`fn` as ZeroGPU runs it: each call in a fresh fork of this process, which keeps nothing
    it writes; arguments and results pickled; a generator stopped at its next item once the
    caller stops reading."""
    context = multiprocessing.get_context("fork")

    def start(args, kwargs):
        pickle.dumps((args, kwargs))  # ZeroGPU sends them through a queue
        receive, send = context.Pipe(duplex=False)
        stop = context.Event()
        worker = context.Process(target=_worker, args=(fn, args, kwargs, send, stop), daemon=True)
        worker.start()
        send.close()
        return worker, receive, stop

    def results(worker, receive, stop):
        try:
            while True:
                kind, value = receive.recv()
                if kind == "error":
                    raise value
                if kind == "end":
                    return
                yield kind, value
        finally:
            stop.set()
            receive.close()
            worker.join(5)
            if worker.is_alive():
                worker.kill()

    if inspect.isgeneratorfunction(fn):

        @functools.wraps(fn)
        def stream(*args, **kwargs):
            for _, item in results(*start(args, kwargs)):
                yield item

        return stream

    @functools.wraps(fn)
    def call(*args, **kwargs):
        return next(value for _, value in results(*start(args, kwargs)))

    return call


def _worker(fn, args, kwargs, send, stop) -> None:
    from specdemo.runtime import threads

    # A fork inherits the parent's OpenMP thread pool without its threads: the first parallel
    # region would wait for them forever, so the emulated worker computes on one thread.
    threads.cap(1)
    try:
        try:
            result = fn(*args, **kwargs)
            if inspect.isgenerator(result):
                for item in result:
                    send.send(("item", item))
                    if stop.is_set():
                        result.close()
                        break
            else:
                send.send(("return", result))
            send.send(("end", None))
        except Exception as e:
            send.send(("error", e))
        finally:
            send.close()
    finally:
        os._exit(0)  # a fork leaves without running the parent's exit handlers
