"""Runs a five-cell notebook with nbclient through jupyter_server's own
gateway client (GatewayKernelManager / GatewayKernelClient, unpatched),
pointed at the jupyter_server given as argv[1]; prints each cell's outputs
as one JSON list."""
import json
import sys

import nbformat
from jupyter_server.gateway.gateway_client import GatewayClient
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_notebook

gc = GatewayClient.instance()
gc.url = sys.argv[1]
gc.auth_token = sys.argv[2]
gc.request_timeout = 120.0
gc.connect_timeout = 60.0

nb = new_notebook(cells=[
    new_code_cell("print('hello from cubicle')"),
    new_code_cell("import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': [3, 4]})"),
    new_code_cell("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [4, 1, 9])\nplt.show()"),
    new_code_cell("1/0"),
    new_code_cell("6*7"),
])
client = NotebookClient(nb, timeout=120, allow_errors=True, startup_timeout=120,
                        kernel_manager_class="jupyter_server.gateway.managers.GatewayKernelManager")
client.execute()
print(json.dumps([c.outputs for c in nb.cells]))
