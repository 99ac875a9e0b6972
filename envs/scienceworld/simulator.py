"""ScienceWorld's simulator on a JVM that makes it replay deterministically.

The simulator keeps a world's objects in hash sets keyed by Java identity hash codes, which a JVM
hands out from a per-thread random sequence. The objects a reset creates get new codes, so after a
reset the same commands visit the objects in another order: listings come out reordered and, worse,
simulated physics (heat exchange, ...) accumulates in another order, so the same commands from the
same start give other temperatures (measured: 45, 46, 49 and 46 degrees on four resets of
``use-thermometer`` variation 1). On a JVM whose identity hash codes are all equal
(``-XX:hashCode=2``) hash sets iterate in insertion order, and every reset replays identically.
ScienceWorld's own constructor starts the JVM with no options, so this one does what it does with them.
"""

from __future__ import annotations

import tempfile

from py4j.java_gateway import (
    CallbackServerParameters,
    GatewayParameters,
    JavaGateway,
    launch_gateway,
)
from scienceworld import ScienceWorldEnv
from scienceworld.constants import BASEPATH, JAR_PATH

JAVA_OPTIONS = ("-XX:+UnlockExperimentalVMOptions", "-XX:hashCode=2")
"""Every Java identity hash code is the same constant: hash sets iterate in insertion order."""


class DeterministicSimulator(ScienceWorldEnv):
    """``scienceworld.ScienceWorldEnv`` on a JVM started with ``JAVA_OPTIONS`` (its constructor, otherwise as is)."""

    def __init__(self, env_step_limit: int):
        port, process = launch_gateway(classpath=JAR_PATH, javaopts=list(JAVA_OPTIONS), die_on_exit=True,
                                       cwd=BASEPATH, return_proc=True)
        self._gateway = JavaGateway(gateway_parameters=GatewayParameters(auto_field=True, port=port),
                                    callback_server_parameters=CallbackServerParameters(port=0, daemonize=True),
                                    java_process=process)
        # The Java side calls back into this process on the port the callback server bound.
        python_port = self._gateway.get_callback_server().get_listening_port()
        java_server = self._gateway.java_gateway_server
        java_server.resetCallbackClient(java_server.getCallbackClient().getAddress(), python_port)
        self.server = self._gateway.jvm.scienceworld.runtime.pythonapi.PythonInterface()
        self.lastStepScore = 0
        self.taskName = None
        self.envStepLimit = env_step_limit
        self.clear_run_histories()
        self.goldPathGenerated = False
        self._obj_tree_tempdir = tempfile.TemporaryDirectory()
