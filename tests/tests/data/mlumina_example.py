import requests

response = requests.post(
    "http://127.0.0.1:8264/add_task",
    json={
        "name": "my_job",
        "entrypoint": "python examples/scheduler/test.py",
        "runtime_env": {"working_dir": "/home/ray/src/mlumina"},
        "priority": 1,
        "cpu": 2,
        "gpu": 0,
        "memory": 4,
        "timeout": 300,
    },
    timeout=60,
)
print(response.status_code, response.json())
