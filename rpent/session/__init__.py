"""The session process: a long-lived owner of the shared services, TaskRuns, operator requests and
code cells that terminals and browsers attach to and detach from.

* ``model``   - ``SessionConfig``, ``ServiceView``, ``TaskRunView`` and the events handed to a sink
* ``core``    - ``Session``: the shared services, TaskRuns, operator requests in trio (no Textual)
* ``defaults``- the seams onto ``rpent.run``, ``rpent.services`` and ``rpent.planners``
* ``layout``  - the session directory (socket, token, state file, log) and the registry of sessions
* ``wire``    - the protocol: length-prefixed ``rpent.rpc.codec`` frames, hello with token, model on the wire
* ``server``  - ``SessionServer``: the session model in trio plus the Unix socket (0600) clients attach to
* ``process`` - start a session detached (``setsid``), ``python -m rpent.session serve|stop|list``
* ``client``  - ``RemoteSession``: the in-process ``Session`` interface over the socket (the TUI uses it)
* ``commands`` - ``TaskCommand`` and the run screen's input parsing (``suite task seed``, ``/steer``)
* ``operator`` - ``TuiOperator``: operator requests answered from a UI, their replies and records
* ``batching`` - ``Batcher`` (coalesce events onto the UI) and ``LineSplitter``
* ``code_cells`` - ``CodeCellService``: code cells run on a TaskRun's toolkit
* ``flywheel_jobs`` - ``FlywheelRunner``: ``rpent-flywheel`` export as a supervised job
* ``supervised`` - ``run_supervised``: a batch subprocess in its own process group, cancelled cleanly

Submodules are imported on use (this package imports nothing at import time).
"""
