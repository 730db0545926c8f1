# The govsearch service image (used by docker-compose.yml).
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY control_plane ./control_plane
COPY agent_gateway ./agent_gateway
RUN pip install --no-cache-dir .
COPY mappings ./mappings
COPY policies ./policies
COPY data ./data
COPY govsearch.yaml ./
EXPOSE 8000
CMD ["sh", "-c", "govsearch load-catalog && govsearch policy publish --env live && govsearch serve --host 0.0.0.0 --port 8000"]
