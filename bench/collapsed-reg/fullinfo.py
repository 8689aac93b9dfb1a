# Full-information online learning on a classification CSV: before each
# block of B contexts, a model trained on every earlier (context, label)
# with all labels known predicts the block; its mistakes are the regret a
# bandit learner could at best approach (it sees one arm's reward a step).
import sys, csv, numpy as np, warnings
from sklearn.neural_network import MLPClassifier
from sklearn.linear_model import LogisticRegression
warnings.filterwarnings("ignore")
path, steps, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rows = list(csv.reader(open(path)))[1:]
X = np.array([[float(v) for v in r[:-1]] for r in rows]); y = np.array([r[-1] for r in rows])
rng = np.random.default_rng(seed)
idx = rng.integers(0, len(X), steps)
X, y = X[idx], y[idx]
X = (X - X.mean(0)) / (X.std(0) + 1e-9)
classes = np.unique(np.array([r[-1] for r in rows]))
for name in ["mlp", "logreg"]:
    mistakes = 0; B = 50; marks = {}
    m = None
    for t in range(0, steps, B):
        if t == 0:
            pred = np.array([classes[0]] * B)
        else:
            if name == "mlp":
                if m is None:
                    m = MLPClassifier(hidden_layer_sizes=(100,), random_state=seed, max_iter=1)
                    m.partial_fit(X[:t], y[:t], classes=classes)
                for _ in range(20):
                    p = rng.permutation(t)
                    for s in range(0, t, 64):
                        m.partial_fit(X[p[s:s+64]], y[p[s:s+64]])
                    if t > 2000: break
            else:
                if len(np.unique(y[:t])) > 1:
                    m = LogisticRegression(max_iter=300, C=1.0).fit(X[:t], y[:t])
            pred = m.predict(X[t:t+B]) if m is not None else np.array([classes[0]] * B)
        mistakes += int((pred != y[t:t+B]).sum())
        if t + B in (1000, 2000, 5000): marks[t+B] = mistakes
    print(path.split('/')[-1], name, "seed", seed, "regret", mistakes, marks, flush=True)
