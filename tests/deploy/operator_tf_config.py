#!/usr/bin/python3
"""The TF_CONFIG each replica of a deployment gets, as the launcher that starts it writes it.

    operator_tf_config.py tfjob MANIFEST [--loopback PORT] [--mount /data=DIR ...]
    operator_tf_config.py statefulset MANIFEST [--loopback PORT] [--mount ...]

Prints one line per replica, tab-separated: its type, index, TF_CONFIG and command (quoted for
a shell).
For a TFJob, TF_CONFIG is generated as Kubeflow's training operator generates it: every replica
type lower-cased, addresses <job>-<type>-<i>.<namespace>.svc on the tfjob-port (2222), the
evaluator outside the cluster, "environment": "cloud". For the StatefulSets, each pod's own
shell snippet builds it, run with the pod's HOSTNAME and a stand-in `troupe` that prints it.
--loopback gives every replica an address of its own on the loopback network (127.0.0.2, ...)
and PORT, as pods each have their own IP and the same port. --mount rewrites the volumes'
paths in the commands to directories of this machine; "evaluator:/etc/troupe=DIR" only in the
evaluator's (whose Secret differs).
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile

import yaml


def tfjob(manifest):
    """(type, index, TF_CONFIG dict, command) per replica of the TFJob in `manifest`."""
    name = manifest["metadata"]["name"]
    namespace = manifest["metadata"].get("namespace", "default")
    specs = manifest["spec"]["tfReplicaSpecs"]
    cluster = {}
    for rtype, spec in specs.items():
        kind = rtype.lower()
        if kind == "evaluator":  # not part of the training cluster
            continue
        container = spec["template"]["spec"]["containers"][0]
        port = next((p["containerPort"] for p in container.get("ports", [])
                     if p.get("name") == "tfjob-port"), 2222)
        cluster[kind] = ["%s-%s-%d.%s.svc:%d" % (name, kind, i, namespace, port)
                         for i in range(spec.get("replicas", 1))]
    replicas = []
    for rtype, spec in specs.items():
        container = spec["template"]["spec"]["containers"][0]
        assert container["name"] == "tensorflow", "TFJob runs the container named tensorflow"
        command = container.get("command", ["troupe"]) + container.get("args", [])
        for i in range(spec.get("replicas", 1)):
            config = {"cluster": cluster, "task": {"type": rtype.lower(), "index": i},
                      "environment": "cloud"}
            replicas.append((rtype.lower(), i, config, command))
    return replicas


def statefulset(manifest):
    """(type, index, TF_CONFIG dict, command) per pod of the List's StatefulSets."""
    with tempfile.TemporaryDirectory() as shim:
        return pods(manifest, shim)


def pods(manifest, shim):
    """statefulset()'s, with a stand-in troupe in `shim`."""
    namespace = "default"
    with open(os.path.join(shim, "troupe"), "w") as f:
        f.write('#!/bin/sh\nprintf "%s" "$TF_CONFIG" | tr "\\n" " "\necho\nprintf "%s\\n" "$@"\n')
    os.chmod(os.path.join(shim, "troupe"), 0o755)
    replicas = []
    for item in manifest["items"]:
        if item["kind"] != "StatefulSet":
            continue
        pod = item["spec"]["template"]
        container = pod["spec"]["containers"][0]
        env = dict(os.environ, PATH=shim + ":" + os.environ["PATH"], POD_NAMESPACE=namespace)
        for e in container.get("env", []):
            if "value" in e:
                env[e["name"]] = e["value"]
        for i in range(item["spec"]["replicas"]):
            env["HOSTNAME"] = "%s-%d" % (item["metadata"]["name"], i)
            out = subprocess.run(container["command"] + container["args"], env=env, check=True,
                                 capture_output=True, text=True).stdout
            # The stand-in's first line is TF_CONFIG, then the command's words, one a line.
            lines = out.split("\n")
            config = json.loads(lines[0])
            command = ["troupe"] + [w for w in lines[1:] if w != ""]
            replicas.append((config["task"]["type"], config["task"]["index"], config, command))
    return replicas


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=["tfjob", "statefulset"])
    parser.add_argument("manifest")
    parser.add_argument("--loopback", type=int, default=0)
    parser.add_argument("--mount", action="append", default=[])
    args = parser.parse_args()
    with open(args.manifest) as f:
        manifest = yaml.safe_load(f)
    replicas = tfjob(manifest) if args.kind == "tfjob" else statefulset(manifest)
    if args.loopback:
        hosts = {}
        for _, _, config, _ in replicas:
            for addresses in config["cluster"].values():
                for address in addresses:
                    host = address.rsplit(":", 1)[0]
                    hosts.setdefault(host, "127.0.0.%d" % (len(hosts) + 2))
        for _, _, config, _ in replicas:
            config["cluster"] = {job: ["%s:%d" % (hosts[a.rsplit(":", 1)[0]], args.loopback)
                                       for a in addresses]
                                 for job, addresses in config["cluster"].items()}
    mounts = []
    for m in args.mount:
        path, local = m.split("=", 1)
        only, _, path = path.rpartition(":")
        mounts.append((only, path, local))
    for kind, index, config, command in replicas:
        words = []
        for word in command:
            for only, path, local in sorted(mounts, reverse=True):  # a type's own first
                if only not in ("", kind):
                    continue
                word = word.replace(path + "/", local + "/")
                word = local if word == path else word
            words.append(word)
        print("%s\t%d\t%s\t%s" % (kind, index, json.dumps(config), shlex.join(words)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
