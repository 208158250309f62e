"""Evaluate the digits classifier on the test set: metrics.json, a loss-curve PNG and a Markdown report.

The evaluation contract (docs/contracts.md): the model directory is SM_CHANNEL_MODEL, the test data SM_CHANNEL_TEST,
and everything written to TRAINOPS_EVALUATION_DIR is kept; metrics.json is what the quality gate reads.
"""

import json
import os

import numpy as np
import torch
import torch.nn.functional as F
from model import DigitsNet


def main() -> None:
    model_dir = os.environ["SM_CHANNEL_MODEL"]
    test_dir = os.environ["SM_CHANNEL_TEST"]
    out = os.environ.get("TRAINOPS_EVALUATION_DIR") or os.environ["SM_OUTPUT_DATA_DIR"]
    os.makedirs(out, exist_ok=True)

    model = DigitsNet()
    model.load_state_dict(torch.load(os.path.join(model_dir, "model.pt"), map_location="cpu"))
    model.eval()
    data = np.load(os.path.join(test_dir, "digits.npz"))
    images = torch.from_numpy(data["images"]).unsqueeze(1)
    labels = torch.from_numpy(data["labels"])
    with torch.no_grad():
        logits = model(images)
    predictions = logits.argmax(dim=1)
    accuracy = (predictions == labels).float().mean().item()
    loss = F.cross_entropy(logits, labels).item()
    per_class = {str(digit): round((predictions[labels == digit] == digit).float().mean().item(), 4)
                 for digit in range(10)}
    metrics = {"accuracy": round(accuracy, 6), "loss": round(loss, 6), "test_images": int(len(labels))}
    with open(os.path.join(out, "metrics.json"), "w") as handle:
        json.dump(metrics, handle, indent=2)

    with open(os.path.join(model_dir, "training.json")) as handle:
        training = json.load(handle)
    losses = training["epoch_losses"]
    import matplotlib

    matplotlib.use("Agg")  # no screen
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(5, 3.2))
    axes.plot(range(1, len(losses) + 1), losses, marker="o")
    axes.set_xlabel("epoch")
    axes.set_ylabel("training loss")
    axes.set_title(f"digits: test accuracy {accuracy:.3f}")
    axes.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(os.path.join(out, "loss_curve.png"), dpi=100)

    rows = "\n".join(f"| {digit} | {score:.3f} |" for digit, score in per_class.items())
    report = (f"# Digits classifier evaluation\n\n"
              f"- test accuracy: **{accuracy:.4f}** on {len(labels)} images\n- test loss: {loss:.4f}\n"
              f"- trained for {len(losses)} epochs on {training['world_size']} ranks\n\n"
              f"![training loss](loss_curve.png)\n\n| digit | accuracy |\n| --- | --- |\n{rows}\n")
    with open(os.path.join(out, "report.md"), "w") as handle:
        handle.write(report)
    print(json.dumps(metrics))


if __name__ == "__main__":
    main()
