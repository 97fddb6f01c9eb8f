"""Airflow DAG: pre-flight check, then crawl, halt, or fail.

The preflight task runs the preflight command and decides with
preflight_decision.decide (the same rules as the Go example and the
CronJob's decide.sh); a branch then starts the crawl with the recommended
concurrency and backoff, or halts without crawling. A usage or internal
error of preflight fails the run.

Place this file and preflight_decision.py in the DAGs folder; the workers
need the preflight binary (go build ./cmd/preflight) and the targets file.
"""

import subprocess
from datetime import datetime, timedelta

from airflow.decorators import dag, task
from airflow.exceptions import AirflowFailException
from airflow.operators.bash import BashOperator
from airflow.operators.empty import EmptyOperator

from preflight_decision import decide

PREFLIGHT = "/usr/local/bin/preflight"
TARGETS = "/etc/crawler/targets.txt"
PLANNED_WORKERS = "32"


@dag(schedule="0 3 * * *", start_date=datetime(2026, 1, 1), catchup=False,
     default_args={"retries": 0, "execution_timeout": timedelta(minutes=5)})
def crawl_with_preflight():
    @task.branch
    def preflight(ti=None):
        # -timeout bounds the whole check, reading the targets included.
        proc = subprocess.run(
            [PREFLIGHT, "-timeout", "30s", "-workers", PLANNED_WORKERS, "-targets", TARGETS],
            capture_output=True, text=True, timeout=60)
        decision = decide(proc.returncode, proc.stdout)
        ti.xcom_push(key="decision", value=decision)
        if decision["action"] == "error":
            raise AirflowFailException(decision["reason"] + "\n" + proc.stderr)
        return "crawl" if decision["action"] == "crawl" else "halt"

    crawl = BashOperator(
        task_id="crawl",
        bash_command=(
            "crawler"
            " --concurrency {{ ti.xcom_pull(task_ids='preflight', key='decision')['max_concurrency'] }}"
            " --initial-delay {{ ti.xcom_pull(task_ids='preflight', key='decision')['initial_delay_sec'] }}s"
            " --skip-hosts '{{ ti.xcom_pull(task_ids='preflight', key='decision')['skip_hosts'] | join(',') }}'"
        ),
    )
    halt = EmptyOperator(task_id="halt")  # alert here: preflight is CRITICAL

    preflight() >> [crawl, halt]


crawl_with_preflight()
