"""The web demo: serve the page at once, load and warm up the model pair behind it.

The page shows the preparation's stages until the pair is ready, then becomes the app (see
specdemo.app.page.preparing); the log gets the same stages as lines. `python app.py` honours
SPECDEMO_PAIR / SPECDEMO_PRECISION / SPECDEMO_DEVICE (see specdemo.models) and Gradio's own
GRADIO_SERVER_NAME / GRADIO_SERVER_PORT.
"""

try:  # on a ZeroGPU Space, spaces must be imported before torch touches CUDA
    import spaces  # noqa: F401
except ImportError:
    pass

from specdemo import models
from specdemo.app.page import preparing, ui
from specdemo.runtime import threads

if __name__ == "__main__":
    threads.cap()  # torch's threads within the CPUs and quota this process may use
    preparation = preparing.Preparation(console=models.ProgressBars())
    if models.zero_gpu():  # spaces emulates CUDA in the main thread only and packs it at launch
        preparation.run()
    else:
        preparation.start()
    # Gradio keeps each session's outputs (~0.4 MB) until this many newer sessions push them out.
    app = ui.build(preparation)
    app.launch(theme=ui.THEME, css=ui.CSS, state_session_capacity=ui.SESSIONS_KEPT)
