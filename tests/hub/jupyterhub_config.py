"""The course on a JupyterHub: the configuration tests/test_hub.py runs (the instructors' page
docs/instructors/jupyterhub.md shows this file as it is).

What is the hub's own default is left out: students log in as Unix users (PAM), each gets a
single-user JupyterLab run as that user (LocalProcessSpawner), as on The Littlest JupyterHub.
What differs between sites comes from the environment (the test sets it); an instructor writes
the values in instead.
"""

import os
import sys
from pathlib import Path

c = get_config()  # noqa: F821 -- provided by JupyterHub when it loads this file
env = os.environ
state = Path(env["COURSE_HUB_STATE"])  # the hub's database, cookie secret and pid files (root only)
bin_dir = Path(sys.executable).parent  # the environment JupyterHub, JupyterLab and nbgrader are in

c.JupyterHub.bind_url = env["COURSE_HUB_URL"]  # e.g. http://127.0.0.1:8000 (TLJH: its Traefik)
c.JupyterHub.hub_bind_url = env["COURSE_HUB_API_URL"]
c.ConfigurableHTTPProxy.api_url = env["COURSE_HUB_PROXY_API_URL"]
c.ConfigurableHTTPProxy.command = [env["COURSE_HUB_PROXY"]]  # configurable-http-proxy, from npm
c.ConfigurableHTTPProxy.pid_file = str(state / "proxy.pid")
c.JupyterHub.db_url = f"sqlite:///{state / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(state / "jupyterhub_cookie_secret")
c.JupyterHub.pid_file = str(state / "jupyterhub.pid")

# Students: the course's Unix users (nbgrader's roster holds the same names).
c.Authenticator.allowed_users = set(env["COURSE_HUB_STUDENTS"].split())

# Each student's JupyterLab, with nbgrader's Assignment List. The folder named by
# JUPYTER_CONFIG_PATH holds the students' nbgrader_config.py: the course id and the exchange root
# (a system-wide /etc/jupyter/nbgrader_config.py does the same).
c.Spawner.cmd = [str(bin_dir / "jupyterhub-singleuser")]
c.Spawner.default_url = "/lab"
c.Spawner.environment = {"JUPYTER_CONFIG_PATH": env["COURSE_HUB_STUDENT_CONFIG"]}

# The grading service: `python -m autograder serve COURSE`, started and stopped by the hub, run
# as the hub's user (root here: the grading sandbox needs it). Its page, behind the hub's login,
# shows each student their own submissions: queue place, estimated wait, result.
course = env["COURSE_HUB_COURSE"]  # the instructor's course folder (nbgrader_config.py, gradebook.db)
c.JupyterHub.services = [{
    "name": "autograder",
    "url": env["COURSE_HUB_SERVICE_URL"],  # where its page listens, e.g. http://127.0.0.1:10101
    "command": [sys.executable, "-m", "autograder", "serve", course, *env.get("COURSE_HUB_SERVE_OPTIONS", "").split()],
    "cwd": course,
    "environment": {"HOME": env.get("HOME", "/root")},
    "oauth_no_confirm": True,  # the course's own page: no "authorize access" question
}]
# JupyterHub 5+: a user may open a service's page only with this scope.
c.JupyterHub.load_roles = [{"name": "user", "scopes": ["self", "access:services!service=autograder"]}]
