"""Run by Label Studio's own interpreter (its virtual environment has label-studio-sdk), from
test_label_studio_server.py: a project with the labeling config, our tasks imported with their
predictions, each prediction accepted as an annotation, and the project exported as JSON.

    python label_studio_round_trip.py URL TOKEN CONFIG.xml TASKS.json EXPORT.json
"""
import json
import sys

from label_studio_sdk import LabelStudio


def main(url: str, token: str, config_path: str, tasks_path: str, export_path: str) -> None:
    client = LabelStudio(base_url=url, api_key=token)
    with open(config_path, encoding="utf8") as f:
        project = client.projects.create(title="spacy-w2ner round trip", label_config=f.read())
    with open(tasks_path, encoding="utf8") as f:
        client.projects.import_tasks(id=project.id, request=json.load(f))
    for task in client.tasks.list(project=project.id):
        prediction = task.predictions[0]
        result = prediction["result"] if isinstance(prediction, dict) else prediction.result
        client.annotations.create(id=task.id, result=result)
    data = b"".join(client.projects.exports.download_sync(project.id, export_type="JSON", download_all_tasks=True))
    with open(export_path, "wb") as f:
        f.write(data)


if __name__ == "__main__":
    main(*sys.argv[1:6])
