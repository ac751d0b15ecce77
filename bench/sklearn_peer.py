#!/usr/bin/env python3
"""canned_bench's peer: the same models in scikit-learn on Fashion-MNIST from Debian's
dataset-fashion-mnist, one line each: "name seconds accuracy peer". Boosting's peer is XGBoost's
hist booster where Debian's python3-xgboost is installed (what users would pick), else
scikit-learn's HistGradientBoostingClassifier. Exits 1 with a message on stderr when
python3-sklearn is not installed.
    sklearn_peer.py [--quick] [--only NAME]"""
import gzip
import struct
import sys
import time

try:
    import numpy as np
    from sklearn.linear_model import LogisticRegression
    from sklearn.neural_network import MLPClassifier
    from sklearn.cluster import MiniBatchKMeans
    from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier
    from sklearn.metrics import adjusted_rand_score
    from sklearn.svm import LinearSVC
except ImportError:
    sys.exit("python3-sklearn is not installed")
try:
    import xgboost
except ImportError:
    xgboost = None

DIR = "/usr/share/datasets/fashion-mnist"


def idx(name):
    for path in (f"{DIR}/{name}.gz", f"{DIR}/{name}"):
        try:
            opener = gzip.open if path.endswith(".gz") else open
            with opener(path, "rb") as f:
                data = f.read()
            break
        except FileNotFoundError:
            continue
    else:
        sys.exit(f"no {name} in {DIR}")
    dims = data[3]
    shape = struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims])
    return np.frombuffer(data, np.uint8, offset=4 + 4 * dims).reshape(shape)


def main():
    quick = "--quick" in sys.argv
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv[:-1] else None
    x = idx("train-images-idx3-ubyte").reshape(60000, -1) / 255.0
    y = idx("train-labels-idx1-ubyte")
    tx = idx("t10k-images-idx3-ubyte").reshape(10000, -1) / 255.0
    ty = idx("t10k-labels-idx1-ubyte")
    epochs = 1 if quick else 10
    rounds = 10 if quick else 100

    def boosting():
        if xgboost is not None:
            # As troupe's boosting: depth 6, 64 bins, learning rate 0.1, both cores.
            return ("xgboost", xgboost.XGBClassifier(n_estimators=rounds, max_depth=6, max_bin=64,
                                                     tree_method="hist", learning_rate=0.1,
                                                     n_jobs=2, random_state=42))
        return ("sklearn", HistGradientBoostingClassifier(max_iter=rounds, max_depth=6,
                                                          max_leaf_nodes=None, max_bins=64,
                                                          early_stopping=False, random_state=42))
    models = {
        "linear": ("sklearn", LogisticRegression(max_iter=epochs * 10)),
        "dnn": ("sklearn", MLPClassifier(hidden_layer_sizes=(256, 128), max_iter=epochs,
                                         random_state=42)),
        "svm": ("sklearn", LinearSVC(max_iter=epochs * 100)),
        # As canned_bench's: 100 trees (10 quick), all cores.
        "random_forest": ("sklearn", RandomForestClassifier(n_estimators=rounds, n_jobs=-1,
                                                            random_state=42)),
        "boosted_trees": boosting(),
        # Classes 0-4 against 5-9: one tree a round.
        "boosted_trees_binary": boosting(),
    }
    for name, (peer, model) in models.items():
        if only and name != only:
            continue
        labels, test_labels = (y >= 5, ty >= 5) if name.endswith("_binary") else (y, ty)
        start = time.monotonic()
        model.fit(x, labels)
        seconds = time.monotonic() - start
        print(name, f"{seconds:.3f}", f"{model.score(tx, test_labels):.4f}", peer, flush=True)
    if only and only != "kmeans":
        return
    km = MiniBatchKMeans(n_clusters=10, max_iter=epochs, random_state=42, n_init=1)
    start = time.monotonic()
    km.fit(x)
    seconds = time.monotonic() - start
    print("kmeans", f"{seconds:.3f}", f"{adjusted_rand_score(ty, km.predict(tx)):.4f}", "sklearn",
          flush=True)


if __name__ == "__main__":
    main()
