"""The web demo: load the model pair once, build the UI, serve it.

`python app.py` honours SPECDEMO_PAIR / SPECDEMO_PRECISION / SPECDEMO_DEVICE (see specdemo.models)
and Gradio's own GRADIO_SERVER_NAME / GRADIO_SERVER_PORT.
"""

try:  # on a ZeroGPU Space, spaces must be imported before torch touches CUDA
    import spaces  # noqa: F401
except ImportError:
    pass

from specdemo import models
from specdemo.app import handlers, race, ui

if __name__ == "__main__":
    pair = models.load_pair(progress=models.ProgressBars())
    print(f"specdemo: {handlers.model_markdown(pair.summary).replace('**', '')}", flush=True)
    if not models.zero_gpu():  # there the GPU exists only inside a request
        race.rehearse(pair)
    ui.build(pair).launch(theme=ui.THEME, css=ui.CSS)
