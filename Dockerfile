# deployflow worker and CLI. Used by docker-compose.yml.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/deployflow-worker ./worker \
 && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/deployflow ./starter

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/ /usr/local/bin/
EXPOSE 9464
ENTRYPOINT ["/usr/local/bin/deployflow-worker"]
