#!/usr/bin/python3
"""A small WebKitGTK browser for WebKitWebDriver, with an on-disk profile.

MiniBrowser's --automation session is always private (ephemeral), and there
navigator.storage.getDirectory() rejects with UnknownError; this browser keeps
its website data in --profile DIR. WebKitGTK ships OPFS and the Storage API
switched off where Safari ships them on: --features +A,-B turns WebKit
features on or off by their identifiers (Settings.get_all_features()).
WebKitWebDriver starts it (capability webkitgtk:browserOptions) with WEBKIT_INSPECTOR_SERVER set.
Run by Debian's /usr/bin/python3 with python3-gi and gir1.2-webkit2-4.1.
"""
import os
import sys

import gi

gi.require_version("Gtk", "3.0")
gi.require_version("WebKit2", "4.1")
from gi.repository import Gtk, WebKit2  # noqa: E402


def option(name, default=None):
    args = sys.argv[1:]
    for i, a in enumerate(args):
        if a == name and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(name + "="):
            return a[len(name) + 1:]
    return default


profile = option("--profile")
if not profile:
    sys.exit("browser.py: --profile DIR is required")
data = WebKit2.WebsiteDataManager(base_data_directory=profile, base_cache_directory=profile + "/cache")
context = WebKit2.WebContext(website_data_manager=data)
# WebKitWebDriver starts the browser with WEBKIT_INSPECTOR_SERVER in its environment and waits for
# an automation session on it.
driven = "WEBKIT_INSPECTOR_SERVER" in os.environ or "--automation" in sys.argv
context.set_automation_allowed(driven)

settings = WebKit2.Settings()
settings.set_enable_developer_extras(True)
wanted = [f for f in (option("--features", "") or "").split(",") if f]
features = WebKit2.Settings.get_all_features()
known = {features.get(i).get_identifier(): features.get(i) for i in range(features.get_length())}
for f in wanted:
    on, name = f[0] == "+", f[1:]
    if f[0] not in "+-" or name not in known:
        sys.exit(f"browser.py: unknown WebKit feature {f!r} (use +Name or -Name)")
    settings.set_feature_enabled(known[name], on)

windows = []


def new_view(*_):
    view = WebKit2.WebView(web_context=context, settings=settings, is_controlled_by_automation=True)
    window = Gtk.Window(default_width=1024, default_height=768)
    window.add(view)
    window.show_all()
    windows.append(window)
    view.connect("close", lambda v: window.destroy())
    return view


def automation_started(_context, session):
    info = WebKit2.ApplicationInfo()
    info.set_name("ckpt-webkit")
    info.set_version(1, 0, 0)
    session.set_application_info(info)
    session.connect("create-web-view", new_view)


context.connect("automation-started", automation_started)
if not driven:
    new_view().load_uri(sys.argv[-1] if len(sys.argv) > 1 else "about:blank")
Gtk.main()
