"""The hub test's own additions to jupyterhub_config.py (not for a course): an API token for the
test, with the admin role, to start the students' servers and act as each student."""

import os

c = get_config()  # noqa: F821 -- provided by JupyterHub when it loads this file
load_subconfig(os.path.join(os.path.dirname(__file__), "jupyterhub_config.py"))  # noqa: F821

c.JupyterHub.services.append({"name": "course-kit-test", "api_token": os.environ["COURSE_HUB_TEST_TOKEN"]})
c.JupyterHub.load_roles.append({"name": "admin", "services": ["course-kit-test"]})
