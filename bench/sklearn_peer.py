#!/usr/bin/env python3
"""canned_bench's peer: the same models in scikit-learn on Fashion-MNIST from Debian's
dataset-fashion-mnist, one line each: "name seconds accuracy". Exits 1 with a message on
stderr when python3-sklearn is not installed."""
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
    x = idx("train-images-idx3-ubyte").reshape(60000, -1) / 255.0
    y = idx("train-labels-idx1-ubyte")
    tx = idx("t10k-images-idx3-ubyte").reshape(10000, -1) / 255.0
    ty = idx("t10k-labels-idx1-ubyte")
    epochs = 1 if quick else 10
    models = {
        "linear": LogisticRegression(max_iter=epochs * 10),
        "dnn": MLPClassifier(hidden_layer_sizes=(256, 128), max_iter=epochs, random_state=42),
        "svm": LinearSVC(max_iter=epochs * 100),
        # As canned_bench's: 100 trees (10 quick), all cores; boosting's depth 6, 64 bins.
        "random_forest": RandomForestClassifier(n_estimators=10 if quick else 100, n_jobs=-1,
                                                random_state=42),
        "boosted_trees": HistGradientBoostingClassifier(max_iter=10 if quick else 100,
                                                        max_depth=6, max_leaf_nodes=None,
                                                        max_bins=64,
                                                        early_stopping=False, random_state=42),
    }
    for name, model in models.items():
        start = time.monotonic()
        model.fit(x, y)
        seconds = time.monotonic() - start
        print(name, f"{seconds:.3f}", f"{model.score(tx, ty):.4f}", flush=True)
    km = MiniBatchKMeans(n_clusters=10, max_iter=epochs, random_state=42, n_init=1)
    start = time.monotonic()
    km.fit(x)
    seconds = time.monotonic() - start
    print("kmeans", f"{seconds:.3f}", f"{adjusted_rand_score(ty, km.predict(tx)):.4f}", flush=True)


if __name__ == "__main__":
    main()
