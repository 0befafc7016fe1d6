"""spark-submit entry point; the job is `samsa_spark.jobs.ad_clicks` (installed in the image)."""

from samsa_spark.jobs.ad_clicks import main

if __name__ == "__main__":
    main()
