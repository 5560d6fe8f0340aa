"""The browser hub test's additions (tests/test_hub_browser.py): the test's driver token, and the
instructor's formgrader as a hub service, as nbgrader's "Using nbgrader with JupyterHub" sets it
up -- a JupyterLab server of the course folder that only instructors may open."""

import os
import sys
from pathlib import Path

c = get_config()  # noqa: F821 -- provided by JupyterHub when it loads this file
load_subconfig(os.path.join(os.path.dirname(__file__), "driver_config.py"))  # noqa: F821

c.JupyterHub.services.append({
    "name": "formgrader",
    "url": os.environ["COURSE_HUB_FORMGRADER_URL"],
    "command": [str(Path(sys.executable).parent / "jupyterhub-singleuser"), "--allow-root"],  # as the service
    "cwd": os.environ["COURSE_HUB_COURSE"],
    "environment": {"JUPYTERHUB_DEFAULT_URL": "/lab"},
    "oauth_no_confirm": True,
})
c.Authenticator.allowed_users.add(os.environ["COURSE_HUB_INSTRUCTOR"])
c.JupyterHub.load_roles.append({"name": "instructor", "users": [os.environ["COURSE_HUB_INSTRUCTOR"]],
                                "scopes": ["access:services!service=formgrader"]})
